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


# Decisions, sections 13 and 14: the dashboard's and the alert channels' defaults, each a setting.
DASHBOARD_AND_CHANNELS = {
    "setup_link_valid_h": 24.0,
    "session_idle_h": 12.0,
    "sign_in_email_tries": 10,
    "sign_in_email_window_min": 10.0,
    "sign_in_address_tries": 10,
    "sign_in_address_window_min": 10.0,
    "email_timeout_s": 10.0,
    "carrier_timeout_s": 8.0,
    "texts_per_hour": 20,
    "voice_calls_per_hour": 5,
}


def test_the_dashboard_and_channel_defaults_are_the_decisions() -> None:
    settings = load_settings({})
    assert {name: getattr(settings, name) for name in DASHBOARD_AND_CHANNELS} == DASHBOARD_AND_CHANNELS
    assert (settings.setup_link_valid_ms, settings.session_idle_ms) == (86_400_000, 43_200_000)


def test_the_environment_overrides_each_dashboard_and_channel_default() -> None:
    given = {
        "setup_link_valid_h": ("2", 2.0),
        "session_idle_h": ("0.5", 0.5),
        "sign_in_email_tries": ("4", 4),
        "sign_in_email_window_min": ("3", 3.0),
        "sign_in_address_tries": ("6", 6),
        "sign_in_address_window_min": ("7", 7.0),
        "email_timeout_s": ("4", 4.0),
        "carrier_timeout_s": ("3", 3.0),
        "texts_per_hour": ("2", 2),
        "voice_calls_per_hour": ("1", 1),
    }
    settings = load_settings({f"CALLSCREEN_{name.upper()}": raw for name, (raw, _) in given.items()})
    assert {name: getattr(settings, name) for name in given} == {name: value for name, (_, value) in given.items()}
    assert (settings.setup_link_valid_ms, settings.session_idle_ms) == (7_200_000, 1_800_000)


def test_the_log_format_is_a_setting() -> None:
    assert load_settings({}).log_format == "auto"
    assert load_settings({"CALLSCREEN_LOG_FORMAT": "json"}).log_format == "json"
