"""`callscreen run`: the broker (unless one is named), the workers, the alerting and shadow roles and the HTTP edge.

Start order is broker, topics, roles; stop order is the reverse, so everything the roles had
acknowledged is in the broker's log before the broker itself stops.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from aiohttp import web

from callscreen.admin import Admin
from callscreen.broker import StartedBroker, broker_to_start, forget_broker, forget_edge, record_broker, record_edge
from callscreen.localkafka import BrokerUnavailable, die_with_this_process
from infra import event_loop
from infra.heap import freeze_startup_objects
from infra.kafka import BrokerUnreachable, TopicProblem, ensure_topics
from infra.membership import group_instance
from infra.sealing import SecretKeyProblem, ensure_key, key_file, sealer_for
from infra.settings import Settings, to_env
from ingest.app import init_app
from ingest.service import EDGE

log = logging.getLogger("callscreen.run")

STOP_GRACE_S = 6.0
SECRET_KEY_ENV = ("CALLSCREEN_SECRET_KEY", "CALLSCREEN_SECRET_KEY_FILE")
Children = list[tuple[str, int, subprocess.Popen[bytes]]]


def start_child(settings: Settings, role: str, index: int = 0) -> subprocess.Popen[bytes]:
    """A worker, the alerting role or the shadow role as its own process, with the same settings.

    If `run` itself is killed, the roles are killed with it (SIGKILL: both resume from the log, and a
    clean stop would race the broker's own), and the broker gets a SIGTERM and stops cleanly.
    """
    port = settings.metrics_port and settings.metrics_port + (index if role == "worker" else settings.workers)
    if role == "shadow":
        # It serves no metrics: its progress is on the shadow topic.
        port = 0
    child = settings.with_overrides(worker_index=index, role=role, metrics_port=port)
    if role == "alerting":
        # Restarted after a crash, it takes its partitions back under the same id (a worker's id is its own).
        child = child.with_overrides(alerting_instance=group_instance(Path(settings.data_dir) / "alerting"))
    env = {**os.environ, **to_env(child)}
    if role != "alerting":
        # Only the alerting role opens signing secrets; a worker is given no way to.
        for name in SECRET_KEY_ENV:
            env.pop(name, None)
    command = [sys.executable, "-m", "callscreen.cli", "run", "--role", role, "--data-dir", settings.data_dir]
    # The ready line and the demo key own stdout; a child's console output goes to stderr.
    return subprocess.Popen(command, env=env, stdout=sys.stderr, preexec_fn=die_with_this_process(signal.SIGKILL))


def start_children(settings: Settings) -> Children:
    children = [("worker", index, start_child(settings, "worker", index)) for index in range(settings.workers)]
    children.append(("alerting", 0, start_child(settings, "alerting")))
    children.append(("shadow", 0, start_child(settings, "shadow")))
    return children


async def supervise(settings: Settings, children: Children, stop: asyncio.Event, broker: StartedBroker | None) -> None:
    """Restart a child or a durable broker that died; the log and committed offsets let them resume."""
    while not stop.is_set():
        if broker is not None and not broker.alive():
            if not broker.durable:
                # Its topics died with it: every table here is now ahead of a log that no longer exists.
                log.error(
                    "the in-memory broker stopped and its topics are gone; stopping rather than serve stale state"
                )
                stop.set()
                return
            log.error("the local Kafka exited; starting it again on its log", extra={"log": str(broker.log_file)})
            await asyncio.to_thread(broker.start)
        for position, (role, index, process) in enumerate(children):
            if process.poll() is not None:
                log.warning(
                    "child exited; restarting it", extra={"child": role, "index": index, "code": process.returncode}
                )
                children[position] = (role, index, start_child(settings, role, index))
        await asyncio.sleep(0.5)


def stop_processes(children: Children) -> None:
    for _, _, process in children:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for role, index, process in children:
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            log.warning("child did not stop in time; killing it", extra={"child": role, "index": index})
            process.kill()
            process.wait()


def listen(settings: Settings) -> socket.socket:
    """The edge's socket, listening before anything else starts: a port in use stops `run` at once rather
    than after the broker and the roles, and no other process can take the port meanwhile. A connection
    made before the edge serves waits in the backlog."""
    family, kind, proto, _, address = socket.getaddrinfo(
        settings.host, settings.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        # As aiohttp's own sites do: a restart on the port of a run that just stopped must not wait.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_edge(settings: Settings, sock: socket.socket, stop: asyncio.Event, demo: bool) -> None:
    app = init_app(settings)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        edge = app[EDGE]
        while not edge.healthy():
            if stop.is_set():
                return
            await asyncio.sleep(0.05)
        freeze_startup_objects()
        print(f"callscreen ready on http://{settings.host}:{settings.port}", flush=True)
        if demo:
            await print_demo(settings)
        await stop.wait()
    finally:
        await runner.cleanup()


async def print_demo(settings: Settings) -> None:
    try:
        async with Admin(settings) as admin:
            # Each run makes a new demo account, so each gets an address of its own.
            email = f"demo-{uuid.uuid4().hex[:8]}@callscreen.example"
            created = await admin.account_create("guard", "demo", email=email)
    except SecretKeyProblem as exc:
        # `--role edge --demo` holds no key unless given one: the edge needs it only for carrier auth tokens.
        print(f"no demo account: {exc}", file=sys.stderr, flush=True)
        return
    base = f"http://{settings.host}:{settings.port}"
    print(f"demo account {created['account_id']} (guard plan), key: {created['key']}", flush=True)
    print(
        f"try: curl -s -X POST {base}/v1/events -H 'Authorization: Bearer {created['key']}' "
        """-H 'Content-Type: application/json' -d '{"type":"call.started","call_id":"demo-1","""
        """"to":"+14155552671","from":"+12125550123","attrs":{"attestation":"A"}}'""",
        flush=True,
    )
    print(f"dashboard: open {created['setup_url']} to set the password of {email}", flush=True)


def refuse(reason: str) -> int:
    print(f"callscreen: {reason}", file=sys.stderr, flush=True)
    return 2


def run(settings: Settings, demo: bool = False) -> int:
    """Run the roles asked for until SIGINT or SIGTERM; returns the exit code."""
    try:
        event_loop.install(settings.event_loop)
    except ValueError as exc:
        return refuse(str(exc))
    if settings.role in ("all", "alerting"):
        # These hold the secret key: the alerting role opens secrets to sign; `all` makes the key for its
        # alerting child and seals the demo account's secret.
        try:
            made = ensure_key(settings)
            sealer_for(settings)
        except SecretKeyProblem as exc:
            return refuse(str(exc))
        if made is not None:
            log.info("made a secret key for signing secrets at rest", extra={"path": str(made)})
        # The alerting child is told where the key is, never given its text unless the deployment did so.
        settings = settings.with_overrides(secret_key_file=str(key_file(settings)))
    if settings.role in ("worker", "alerting", "shadow"):
        try:
            asyncio.run(ensure_topics(settings))
        except (TopicProblem, BrokerUnreachable) as exc:
            return refuse(str(exc))
        return run_role(settings)
    if settings.role == "all" and not settings.reply_token:
        # The workers it starts answer its edge directly, proving themselves with this run's own token.
        settings = settings.with_overrides(reply_token=secrets.token_hex(16))
    try:
        sock = listen(settings)
    except OSError as exc:
        return refuse(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    data_dir = Path(settings.data_dir)
    with sock:
        # Admin commands that print a dashboard link (`account create --email`, `user invite`) point it here.
        record_edge(data_dir, settings.host, sock.getsockname()[1], os.getpid())
        try:
            return run_with_edge(settings, sock, demo)
        finally:
            forget_edge(data_dir, os.getpid())


def run_with_edge(settings: Settings, sock: socket.socket, demo: bool) -> int:
    """The broker unless one is named, the roles of `all`, and the edge on `sock`, until a signal."""
    data_dir = Path(settings.data_dir)
    broker = broker_to_start(settings)
    if broker is not None:
        try:
            broker.start()
        except BrokerUnavailable as exc:
            return refuse(str(exc))
        settings = settings.with_overrides(broker=broker.url)
        record_broker(data_dir, broker, os.getpid())
        if not broker.durable:
            print(
                f"in-memory broker on {broker.url}: its topics are gone when it stops (for development only)",
                file=sys.stderr,
                flush=True,
            )
    children: Children = []
    lost = False
    try:
        try:
            asyncio.run(ensure_topics(settings))
        except (TopicProblem, BrokerUnreachable) as exc:
            return refuse(str(exc))
        if settings.role == "all":
            children = start_children(settings)
        asyncio.run(_serve_until_signal(settings, sock, demo, children, broker))
    finally:
        stop_processes(children)
        if broker is not None:
            lost = not broker.durable and not broker.alive()
            broker.stop()
            forget_broker(data_dir)
    return 1 if lost else 0


def run_role(settings: Settings) -> int:
    if settings.role == "worker":
        from processors.worker import run_worker

        run_worker(settings)
        return 0
    if settings.role == "shadow":
        from shadow.service import run_shadow

        asyncio.run(run_shadow(settings))
        return 0
    from alerting.service import run_alerting

    asyncio.run(run_alerting(settings))
    return 0


async def _serve_until_signal(
    settings: Settings, sock: socket.socket, demo: bool, children: Children, broker: StartedBroker | None
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(supervise(settings, children, stop, broker))
    try:
        await serve_edge(settings, sock, stop, demo)
    finally:
        watcher.cancel()
