"""The `callscreen` command: the service and its admin surface (README, Operate it)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from alerting import signing
from callscreen.admin import Admin
from callscreen.broker import recorded_broker, recorded_edge
from domain.accounts import PLATFORMS
from domain.commands import Refused
from infra import logs
from infra.sealing import SecretKeyProblem
from infra.settings import Settings, load_settings


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="callscreen", description="Call screening for voice-agent numbers.")
    sub = top.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "--broker",
            help="kafka://host:port[,host:port] for a cluster, or memory for the in-memory development broker "
            "(default: the local Apache Kafka under --data-dir)",
        )
        p.add_argument("--data-dir", dest="data_dir")
        return p

    run = command("run", "start the local Kafka (unless a broker is named), the workers and the HTTP edge")
    run.add_argument("--host")
    run.add_argument("--port", type=int)
    run.add_argument("--workers", type=int)
    run.add_argument("--role", choices=["all", "edge", "worker", "alerting", "shadow"])
    run.add_argument("--demo", action="store_true", help="create a demo account and print a curl line")

    account = command("account", "accounts").add_subparsers(dest="action", required=True)
    create = account.add_parser("create")
    create.add_argument("--plan", required=True, choices=["watch", "guard"])
    create.add_argument("--name", default="")
    create.add_argument("--email", default="", help="invite the account's owner and print their setup link")
    _common(create)

    user = command("user", "people who sign in to the dashboard").add_subparsers(dest="action", required=True)
    invite = user.add_parser("invite")
    invite.add_argument("--account", required=True)
    invite.add_argument("--email", required=True)
    invite.add_argument("--role", choices=["owner", "viewer"], default="owner")
    _common(invite)

    key = command("key", "API keys").add_subparsers(dest="action", required=True)
    key_create = key.add_parser("create")
    key_create.add_argument("--account", required=True)
    key_create.add_argument("--scope", required=True, choices=["full", "read"])
    key_create.add_argument("--label", default="")
    key_revoke = key.add_parser("revoke")
    key_revoke.add_argument("--account", required=True)
    key_revoke.add_argument("--key-id", dest="key_id", required=True)
    _common(key_create, key_revoke)

    token = command("token", "ingest and gate tokens").add_subparsers(dest="action", required=True)
    rotate = token.add_parser("rotate")
    rotate.add_argument("--account", required=True)
    rotate.add_argument("--kind", required=True, choices=["ingest", "gate"])
    rotate.add_argument("--number")
    _common(rotate)

    gate = command("gate", "the carrier gate in front of a protected number").add_subparsers(
        dest="action", required=True
    )
    gate_set = gate.add_parser("set")
    gate_set.add_argument("--account", required=True)
    gate_set.add_argument("--number", required=True)
    gate_set.add_argument("--forward-url", dest="forward_url", help="https: the platform's own voice URL")
    gate_set.add_argument("--review", choices=["challenge", "forward"])
    gate_set.add_argument("--unavailable", choices=["forward", "reject"])
    gate_set.add_argument(
        "--carrier-auth-token", dest="carrier_auth_token", help="verify X-Twilio-Signature with it; '' clears it"
    )
    gate_set.add_argument("--hang-up-suspicious", dest="hang_up_suspicious", choices=["on", "off"])
    _common(gate_set)

    integration = command("integration", "a voice platform's own webhooks, taken as they are").add_subparsers(
        dest="action", required=True
    )
    integration_set = integration.add_parser("set")
    integration_set.add_argument("--account", required=True)
    integration_set.add_argument("--platform", required=True, choices=list(PLATFORMS))
    integration_set.add_argument("--secret", required=True, help="what signs its webhooks; sealed, never shown again")
    integration_set.add_argument("--key", default="", help="LiveKit: the API key that issues its webhooks")
    integration_remove = integration.add_parser("remove")
    integration_remove.add_argument("--account", required=True)
    integration_remove.add_argument("--platform", required=True, choices=list(PLATFORMS))
    _common(integration_set, integration_remove)

    channel = command("channel", "email, text and voice alerts").add_subparsers(dest="action", required=True)
    channel_set = channel.add_parser("set")
    channel_set.add_argument("--account", required=True)
    channel_set.add_argument("--channel", required=True, choices=["email", "text", "voice"])
    chosen = channel_set.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--to", action="append", help="an address or E.164 number; up to 5, each with its own --to")
    chosen.add_argument("--off", action="store_true", help="turn the channel off")
    channel_set.add_argument("--floor", choices=["info", "threat", "critical"])
    _common(channel_set)

    plan = command("plan", "plans").add_subparsers(dest="action", required=True)
    plan_set = plan.add_parser("set")
    plan_set.add_argument("--account", required=True)
    plan_set.add_argument("--plan", required=True, choices=["watch", "guard"])
    _common(plan_set)

    number = command("number", "protected numbers").add_subparsers(dest="action", required=True)
    removed = number.add_parser("remove", help="remove a protected number: it leaves the plan's cap")
    removed.add_argument("--account", required=True)
    removed.add_argument("--number", required=True)
    _common(removed)

    trusted = command("trusted", "the trusted-caller list").add_subparsers(dest="action", required=True)
    for action in ("add", "remove"):
        p = trusted.add_parser(action)
        p.add_argument("--account", required=True)
        p.add_argument("--number", required=True)
        _common(p)

    policy = command("policy", "the account's scoring policy").add_subparsers(dest="action", required=True)
    policy_set = policy.add_parser("set", help="replace the policy; with no option, restore the defaults")
    policy_set.add_argument("--account", required=True)
    policy_set.add_argument("--review", type=float, help="the review threshold, 0 to 1")
    policy_set.add_argument("--reject", type=float, help="the reject threshold, 0 to 1")
    policy_set.add_argument("--weight", action="append", default=[], help="REASON=W, one per --weight")
    policy_set.add_argument("--off", action="append", default=[], help="a reason switched off, one per --off")
    policy_show = policy.add_parser("show", help="every threshold and weight in effect")
    policy_show.add_argument("--account", required=True)
    _common(policy_set, policy_show)

    outbound = command("outbound", "where the account's agents may dial, and the kill switch").add_subparsers(
        dest="action", required=True
    )
    outbound_set = outbound.add_parser("set", help="change the settings named; the others stay")
    outbound_set.add_argument("--account", required=True)
    outbound_set.add_argument(
        "--countries", help="countries its agents may dial, as US,CA; '' for those of its protected numbers"
    )
    outbound_set.add_argument(
        "--transfer", help="numbers and E.164 prefixes a transfer may go to, as +1415,+44; '' for none"
    )
    outbound_set.add_argument("--pause-on", dest="pause_on", choices=["critical", "off"], help="the kill switch")
    outbound_show = outbound.add_parser("show", help="the settings in effect, and the pause")
    outbound_show.add_argument("--account", required=True)
    outbound_resume = outbound.add_parser("resume", help="end the kill switch's pause")
    outbound_resume.add_argument("--account", required=True)
    _common(outbound_set, outbound_show, outbound_resume)

    billing = command("billing", "billing events").add_subparsers(dest="action", required=True)
    failed = billing.add_parser("fail", help="record a failed Guard-plan payment")
    failed.add_argument("--account", required=True)
    failed.add_argument("--amount-cents", dest="amount_cents", type=int, required=True)
    failed.add_argument("--attempt", type=int, default=1)
    _common(failed)

    secret = command("secret", "the webhook signing secret").add_subparsers(dest="action", required=True)
    for action in ("show", "rotate"):
        p = secret.add_parser(action)
        p.add_argument("--account", required=True)
        _common(p)
    command("rebuild", "rebuild every derived table from the topics (the running service's workers fold it)")

    verify = sub.add_parser("verify-signature", help="check a webhook delivery's signature (exit 0 when valid)")
    verify.add_argument("--secret", required=True)
    verify.add_argument("--header", required=True, help="the X-Service-Signature header value")
    verify.add_argument("--body-file", dest="body_file", required=True, help="the raw body, exactly as received")
    verify.add_argument("--tolerance", type=int, default=300, help="seconds (default 300)")
    verify.add_argument("--now", type=int, help=argparse.SUPPRESS)
    return top


def _common(*parsers: argparse.ArgumentParser) -> None:
    for p in parsers:
        p.add_argument("--broker", dest="sub_broker")
        p.add_argument("--data-dir", dest="sub_data_dir")


def verify_signature(args: argparse.Namespace) -> int:
    with open(args.body_file, "rb") as handle:
        body = handle.read()
    now = args.now if args.now is not None else int(time.time())
    if signing.verify(args.secret, args.header, body, now, args.tolerance):
        sys.stdout.write(orjson.dumps({"valid": True}).decode() + "\n")
        return 0
    sys.stderr.write(orjson.dumps({"error": "invalid_signature"}).decode() + "\n")
    return 1


def settings_for(args: argparse.Namespace) -> Settings:
    settings = load_settings()
    return settings.with_overrides(
        broker=getattr(args, "sub_broker", None) or args.broker,
        data_dir=getattr(args, "sub_data_dir", None) or args.data_dir,
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        workers=getattr(args, "workers", None),
        role=getattr(args, "role", None),
    )


def admin_call(args: argparse.Namespace) -> Callable[[Admin], Awaitable[dict[str, Any]]]:
    command, action = args.command, args.action
    if command == "account":
        return lambda a: a.account_create(args.plan, args.name, email=args.email)
    if command == "user":
        return lambda a: a.user_invite(args.account, args.email, args.role)
    if command == "key" and action == "create":
        return lambda a: a.key_create(args.account, args.scope, args.label)
    if command == "key":
        return lambda a: a.key_revoke(args.account, args.key_id)
    if command == "token":
        return lambda a: a.token_rotate(args.account, args.kind, args.number)
    if command == "plan":
        return lambda a: a.plan_set(args.account, args.plan)
    if command == "gate":
        hang_up = None if args.hang_up_suspicious is None else args.hang_up_suspicious == "on"
        return lambda a: a.gate_set(
            args.account,
            args.number,
            args.forward_url,
            args.review,
            args.unavailable,
            args.carrier_auth_token,
            hang_up,
        )
    if command == "integration" and action == "set":
        return lambda a: a.integration_set(args.account, args.platform, args.secret, args.key)
    if command == "integration":
        return lambda a: a.integration_remove(args.account, args.platform)
    if command == "channel":
        return lambda a: a.channel_set(args.account, args.channel, [] if args.off else args.to, args.floor)
    if command == "trusted":
        return lambda a: a.trusted(action, args.account, args.number)
    if command == "policy" and action == "show":
        return lambda a: a.policy_show(args.account)
    if command == "policy":
        body = policy_args(args)
        return lambda a: a.policy_set(args.account, body)
    if command == "outbound" and action == "show":
        return lambda a: a.outbound_show(args.account)
    if command == "outbound" and action == "resume":
        return lambda a: a.outbound_resume(args.account)
    if command == "outbound":
        body = outbound_args(args)
        return lambda a: a.outbound_set(args.account, body)
    if command == "number":
        return lambda a: a.number_remove(args.account, args.number)
    if command == "billing":
        return lambda a: a.payment_failed(args.account, args.amount_cents, args.attempt)
    if action == "show":
        return lambda a: a.secret_show(args.account)
    return lambda a: a.secret_rotate(args.account)


def policy_args(args: argparse.Namespace) -> dict[str, Any]:
    """`policy set`'s options as the body `domain.policy.parse_policy` reads; a weight it cannot read
    is given as a string, for the parser to name."""
    thresholds = {name: value for name in ("review", "reject") if (value := getattr(args, name)) is not None}
    weights: dict[str, Any] = {}
    for given in args.weight:
        reason, _, raw = given.partition("=")
        try:
            weights[reason] = float(raw)
        except ValueError:
            weights[reason] = raw
    return {"thresholds": thresholds, "weights": weights, "off": list(args.off)}


def outbound_args(args: argparse.Namespace) -> dict[str, Any]:
    """`outbound set`'s options as the body `domain.outbound.parse_settings` reads: only those given."""
    body: dict[str, Any] = {}
    if args.countries is not None:
        body["countries"] = _listed(args.countries) if args.countries.strip() else None
    if args.transfer is not None:
        body["transfer"] = _listed(args.transfer)
    if args.pause_on is not None:
        body["pause_on"] = args.pause_on
    return body


def _listed(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


async def run_admin(settings: Settings, call: Callable[[Admin], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    async with Admin(settings) as admin:
        return await call(admin)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "verify-signature":
        return verify_signature(args)
    settings = settings_for(args)
    try:
        logs.configure(settings.log_level if args.command == "run" else "WARNING", settings.role, settings.log_format)
    except ValueError as exc:
        sys.stderr.write(orjson.dumps({"error": "invalid_setting", "detail": str(exc)}).decode() + "\n")
        return 2
    if args.command == "run":
        from callscreen.run import run

        return run(settings, demo=args.demo)
    if args.command == "rebuild":
        from callscreen.rebuild import run_rebuild

        try:
            summary = run_rebuild(recorded_broker(settings))
        except (RuntimeError, TimeoutError) as exc:
            sys.stderr.write(orjson.dumps({"error": "rebuild_failed", "detail": str(exc)}).decode() + "\n")
            return 1
        sys.stdout.write(orjson.dumps(summary).decode() + "\n")
        return 0
    try:
        settings = recorded_edge(recorded_broker(settings))
        result = asyncio.run(run_admin(settings, admin_call(args)))
    except Refused as exc:
        sys.stderr.write(orjson.dumps({"error": str(exc), **exc.context}).decode() + "\n")
        return 1
    except SecretKeyProblem as exc:
        sys.stderr.write(orjson.dumps({"error": "secret_key", "detail": str(exc)}).decode() + "\n")
        return 1
    except Exception as exc:
        sys.stderr.write(orjson.dumps({"error": "unavailable", "detail": str(exc)}).decode() + "\n")
        return 2
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
