"""Signing secrets at rest: sealed with the deployment key, opened with any key of its list."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from infra.sealing import PREFIX, Sealer, SecretKeyProblem, ensure_key, key_file, sealer_for
from infra.settings import Settings, load_settings

SECRET = "whsec_" + "A1b2" * 8


def new_key() -> str:
    return Fernet.generate_key().decode()


def test_seal_hides_the_secret_and_open_returns_it() -> None:
    sealer = Sealer([new_key()])
    stored = sealer.seal(SECRET)
    assert stored.startswith(PREFIX)
    assert SECRET not in stored and SECRET[6:] not in stored
    assert sealer.open(stored) == SECRET
    # Fernet tokens carry a random IV: the same secret never seals to the same text twice.
    assert sealer.seal(SECRET) != stored


def test_a_plain_secret_from_before_sealing_reads_as_it_is() -> None:
    assert Sealer([new_key()]).open(SECRET) == SECRET


def test_rotation_the_first_key_seals_every_key_opens() -> None:
    old, new = new_key(), new_key()
    sealed_before = Sealer([old]).seal(SECRET)
    rotated = Sealer([new, old])
    sealed_after = rotated.seal(SECRET)
    assert rotated.open(sealed_before) == rotated.open(sealed_after) == SECRET
    # Sealed with the first key only: a deployment that has dropped the old key still opens it.
    assert Sealer([new]).open(sealed_after) == SECRET
    with pytest.raises(SecretKeyProblem):
        Sealer([new]).open(sealed_before)


def test_a_wrong_or_tampered_token_is_refused_without_naming_the_key() -> None:
    key = new_key()
    stored = Sealer([key]).seal(SECRET)
    with pytest.raises(SecretKeyProblem) as wrong:
        Sealer([new_key()]).open(stored)
    assert key not in str(wrong.value)
    tampered = stored[:-4] + ("AAAA" if not stored.endswith("AAAA") else "BBBB")
    with pytest.raises(SecretKeyProblem):
        Sealer([key]).open(tampered)


def test_a_malformed_key_is_refused_without_repeating_it() -> None:
    with pytest.raises(SecretKeyProblem) as bad:
        Sealer(["not-a-fernet-key"])
    assert "not-a-fernet-key" not in str(bad.value)
    with pytest.raises(SecretKeyProblem):
        Sealer([])


def test_keys_come_from_the_setting_comma_separated_before_the_file(tmp_path: Path) -> None:
    first, second, from_file = new_key(), new_key(), new_key()
    (tmp_path / "secret.key").write_text(f"# the deployment key\n{from_file}\n")
    given = sealer_for(Settings(data_dir=str(tmp_path), secret_key=f"{first}, {second}"))
    assert Sealer([first]).open(given.seal(SECRET)) == SECRET
    assert given.open(Sealer([second]).seal(SECRET)) == SECRET
    with pytest.raises(SecretKeyProblem):
        given.open(Sealer([from_file]).seal(SECRET))
    from_data_dir = sealer_for(Settings(data_dir=str(tmp_path)))
    assert Sealer([from_file]).open(from_data_dir.seal(SECRET)) == SECRET


def test_no_key_at_all_is_a_clear_refusal(tmp_path: Path) -> None:
    with pytest.raises(SecretKeyProblem) as missing:
        sealer_for(Settings(data_dir=str(tmp_path)))
    assert "CALLSCREEN_SECRET_KEY" in str(missing.value)


def test_ensure_key_makes_one_private_key_file_once(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path / "data"))
    made = ensure_key(settings)
    assert made == key_file(settings) == tmp_path / "data" / "secret.key"
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    written = made.read_text()
    assert ensure_key(settings) is None
    assert made.read_text() == written
    sealer = sealer_for(settings)
    assert Sealer([written.strip()]).open(sealer.seal(SECRET)) == SECRET


def test_ensure_key_leaves_a_given_key_alone(tmp_path: Path) -> None:
    assert ensure_key(Settings(data_dir=str(tmp_path), secret_key=new_key())) is None
    assert not (tmp_path / "secret.key").exists()
    named = tmp_path / "elsewhere" / "deploy.key"
    assert ensure_key(Settings(data_dir=str(tmp_path), secret_key_file=str(named))) == named


def test_the_settings_read_the_key_from_the_environment_and_never_show_it() -> None:
    key = new_key()
    settings = load_settings({"CALLSCREEN_SECRET_KEY": key, "CALLSCREEN_SECRET_KEY_FILE": "/run/k"})
    assert (settings.secret_key, settings.secret_key_file) == (key, "/run/k")
    assert key not in repr(settings)
