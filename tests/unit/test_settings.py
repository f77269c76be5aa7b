"""Settings: the rules' defaults, overridden by the settings file, the policy file, then the environment."""

from __future__ import annotations

from pathlib import Path

from domain.rules import Rules
from infra.settings import load_settings, to_env


def test_defaults_are_the_rules_objects() -> None:
    settings = load_settings({})
    assert settings.rules == Rules()
    assert settings.rules.detectors.cooldown_min == 15 and settings.rules.limits.events_per_minute == 1200


def test_files_then_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "callscreen.toml"
    config.write_text(
        "port = 9000\nlive_silent_s = 90\n[detectors]\nrate_calls = 7\n[scoring.weights]\nforwarded = 0.2\n"
    )
    policy = tmp_path / "policy.toml"
    policy.write_text("[scoring]\nreject = 0.9\n")
    env = {
        "CALLSCREEN_CONFIG": str(config),
        "CALLSCREEN_POLICY_FILE": str(policy),
        "CALLSCREEN_DETECT_RATE_CALLS": "8",
        "CALLSCREEN_EVENTS_PER_MINUTE": "600",
    }
    settings = load_settings(env)
    assert settings.port == 9000
    assert settings.rules.live.silent_s == 90.0
    assert settings.rules.detectors.rate_calls == 8
    assert settings.rules.scoring.reject == 0.9
    assert settings.rules.scoring.weights["forwarded"] == 0.2
    assert settings.rules.scoring.weights["self_call"] == 0.6
    assert settings.rules.limits.events_per_minute == 600


def test_children_get_the_same_scalars() -> None:
    settings = load_settings({"CALLSCREEN_LIVE_SILENT_S": "75", "CALLSCREEN_BROKER": "kafka://h:1"})
    env = to_env(settings)
    assert env["CALLSCREEN_LIVE_SILENT_S"] == "75.0" and env["CALLSCREEN_BROKER"] == "kafka://h:1"
    assert load_settings(env) == settings
