"""The wheel, installed into a fresh virtual environment, runs (README, "Installed with pip or pipx").

Nothing of the checkout is importable there: the wheel is built from a copy of the sources, and every
command runs outside the checkout with no PYTHONPATH, so whatever `callscreen run` reads at run time (the
Kafka POM, templates, static files, schemas) has to be in the wheel.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pytest

from callscreen import localkafka
from infra.ports import free_port
from tests.service import READY_PREFIX, wait_for_status

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
# What the Dockerfile copies to build the package. The build runs on a copy, so its `build/` and
# `*.egg-info` stay out of the shared work tree, and no stale build output there can reach the wheel.
PACKAGES = ("callscreen", "ingest", "processors", "alerting", "infra", "domain", "schemas")
METADATA = ("pyproject.toml", "README.md")
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
TO, CALLER = "+14155552671", "+19197770601"


def outside_env() -> dict[str, str]:
    """This environment without what could make the checkout importable or name another broker. HOME,
    XDG_CACHE_HOME and CALLSCREEN_KAFKA_HOME stay: the installed package finds the same jar cache."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTHON", "VIRTUAL_ENV"))
        and (not name.startswith("CALLSCREEN_") or name == "CALLSCREEN_KAFKA_HOME")
    }


def pip(cwd: Path, *args: str) -> None:
    """The checkout's pip: a build without isolation downloads nothing; installs come from pip's cache."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args]
    subprocess.run(command, check=True, cwd=cwd, env=outside_env())


def installed(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command of the installed package, run outside the checkout."""
    done = subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=outside_env()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the runtime lock's dependencies and the wheel, nothing else."""
    work = tmp_path_factory.mktemp("installed")
    source = work / "source"
    for name in PACKAGES:
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in METADATA:
        shutil.copy2(ROOT / name, source / name)
    pip(work, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(work / "dist"), str(source))
    shutil.rmtree(source)
    (wheel,) = (work / "dist").glob("callscreen-*.whl")
    env = work / "venv"
    # Without a pip of its own: the checkout's installs into it (`--python`), as pipx's shared pip does.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, cwd=work)
    into = ("--python", str(env / "bin" / "python"))
    lock = str(ROOT / "deploy" / "requirements.lock")
    # Byte-compiling every dependency would take most of the install's time and prove nothing here.
    pip(work, *into, "install", "--no-deps", "--no-compile", "--require-hashes", "-r", lock)
    pip(work, *into, "install", "--no-deps", "--no-compile", str(wheel))
    # The runtime lock holds every dependency the wheel declares.
    pip(work, *into, "check")
    return env


def test_the_installed_fetch_finds_its_pom_and_the_shared_jar_cache(venv: Path, tmp_path: Path) -> None:
    home = os.environ.get("CALLSCREEN_KAFKA_HOME", "")
    # Fetched once per machine (make's install step; or here, as the pipeline tests' Kafka would).
    lib = localkafka.fetch(home)
    found = installed(venv, tmp_path, "python", "-c", "import callscreen.localkafka as k; print(k.POM)")
    site_packages = next(venv.glob("lib/python3*/site-packages")).resolve()
    assert Path(found.stdout.strip()) == site_packages / "callscreen" / "kafka" / "pom.xml"
    fetched = installed(venv, tmp_path, "python", "-m", "callscreen.localkafka")
    # The same cache, already complete: nothing fetched, nothing said.
    assert (fetched.stdout, fetched.stderr) == (f"{lib}\n", "")


@pytest.mark.timeout(READY_TIMEOUT_S + STOP_TIMEOUT_S + 30)
async def test_installed_run_starts_its_kafka_and_answers_a_call(
    venv: Path, tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    data_dir = tmp_path / "data"
    with open(tmp_path / "run.log", "wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(venv / "bin" / "callscreen"),
            *("run", "--port", str(free_port()), "--data-dir", str(data_dir)),
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=tmp_path,
            env=outside_env(),
        )
    try:
        base_url = await ready_url(process, tmp_path / "run.log")
        created = await asyncio.create_subprocess_exec(
            str(venv / "bin" / "callscreen"),
            *("account", "create", "--plan", "guard", "--data-dir", str(data_dir)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=outside_env(),
        )
        out, err = await created.communicate()
        assert created.returncode == 0, err.decode()
        headers = {"Authorization": f"Bearer {orjson.loads(out)['key']}"}
        await wait_for_status(http, "GET", f"{base_url}/v1/account", 200, headers=headers)
        start = {"type": "call.started", "call_id": "c1", "to": TO, "from": CALLER}
        async with http.post(f"{base_url}/v1/events", json=start, headers=headers) as r:
            assert r.status == 200, await r.text()
            answer = await r.json()
        # A first call from a valid number on a fresh log: no signal, so score 0 and allow (docs/rules.md).
        assert answer == {
            "call_id": "c1",
            "score": 0.0,
            "action": "allow",
            "thresholds": {"review": 0.5, "reject": 0.8},
            "reasons": [],
            "block": None,
            "checks": {
                "caller_calls_10m": 1,
                "network_calls": 0,
                "network_accounts": 0,
                "network_bad_accounts": 0,
                "network_good_accounts": 0,
                "network_bad_token_accounts": 0,
                "network_good_token_accounts": 0,
            },
            "prior": {"points": 0, "calls": 0, "good": 0, "last": None},
        }
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def ready_url(process: asyncio.subprocess.Process, log: Path) -> str:
    """The base URL from `callscreen run`'s ready line, once it printed it."""
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), left)).decode()
        except TimeoutError:
            break
        if not line:
            raise AssertionError(f"callscreen run exited ({await process.wait()}): {log.read_text()[-2000:]}")
        if line.startswith(READY_PREFIX):
            return line[len(READY_PREFIX) :].strip()
    raise AssertionError(f"callscreen run printed no ready line within {READY_TIMEOUT_S:.0f}s; see {log}")
