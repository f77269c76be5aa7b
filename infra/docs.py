"""The documents written from the code: docs/rules.md from the rules objects, and the layers picture in
docs/architecture.md from the packages' own imports. `python -m infra.docs` (`make docs`) rewrites
both; a test fails when either is out of date."""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.alerts import SEVERITY
from domain.live import ALERT_LEVEL, FLAGS
from domain.rules import Rules
from infra.settings import CONCERNS

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "docs" / "rules.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGES = ("callscreen", "ingest", "processors", "alerting", "shadow", "infra", "domain", "schemas")
BEGIN, END = "<!-- layers: written by `make docs` -->", "<!-- end of layers -->"

INTRO = """# Rules, thresholds and reason codes

Every rule Callscreen applies, with its default. The defaults live once, in `domain/rules.py`;
`infra/settings.py` builds a deployment's rules from them and overrides them from the environment
(`CALLSCREEN_<NAME>`), the settings file (`callscreen.toml`, or `CALLSCREEN_CONFIG`) and the policy
file (`CALLSCREEN_POLICY_FILE`), the environment last. In a TOML file a rule is either its name
(`live_silent_s = 90`) or a key of its concern's table (`[live]` `silent_s = 90`); tables of values
(`[scoring.weights]`) are set in the files only.

This page is written from the code (`python -m infra.docs`, run by `make docs`); a test fails when
it is out of date.
"""

HEADINGS = {
    "scoring": "Scoring a start, and the settled spam score",
    "live": "The live monitor",
    "detectors": "Detectors and cooldowns",
    "plans": "Plans",
    "limits": "Limits",
}


def _value(value: Any) -> str:
    if isinstance(value, frozenset):
        return f"`{','.join(sorted(value))}`" if value else "none"
    return f"`{value}`"


def concern_section(name: str, rules: Any) -> list[str]:
    prefix = CONCERNS[name][0]
    lines = [f"## {HEADINGS[name]}", "", "| setting | default |", "|---|---|"]
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for field in dataclasses.fields(rules):
        value = getattr(rules, field.name)
        if isinstance(value, Mapping):
            tables.append((field.name, value))
            continue
        lines.append(f"| `CALLSCREEN_{(prefix + field.name).upper()}` | {_value(value)} |")
    for table, values in tables:
        lines += ["", f"`[{name}.{table}]`:", "", "| key | default |", "|---|---|"]
        lines += [f"| `{key}` | {_value(value)} |" for key, value in values.items()]
    return [*lines, ""]


def reasons_section(rules: Rules) -> list[str]:
    lines = [
        "## Reason codes",
        "",
        "A start's `reasons` name every signal that moved its score, largest weight first (weights above);",
        "these codes stand alone:",
        "",
        "| reason | meaning |",
        "|---|---|",
        "| `trusted` | the caller is on the account's trusted list: score 0, action `allow` |",
        "| `blocked` | an active block on this caller for this number: score 1, action `reject` |",
        "| `capped` | the plan's daily scoring allowance is spent: recorded, allowed, not scored |",
        f"| `prior_good` | good history (at least {rules.scoring.prior_good_calls} earlier calls settled below"
        f" {rules.scoring.prior_good_below}, none above {rules.scoring.prior_good_none_above}): the score times"
        f" {rules.scoring.prior_good_relief} |",
        "",
        "A call's `reasons` then list each live flag as `live_<flag>`.",
        "",
    ]
    return lines


def network_section(rules: Rules) -> list[str]:
    return [
        "## Network evidence",
        "",
        "A start's `prior` and `GET /v1/reputation` count every account's calls. The rules read less: the",
        "scoring account's own history of the caller (its `quiet` imports too) always counts; another account's",
        "counts toward `prior_bad`, `prior_good` and a caller being fresh only when at least"
        f" {rules.scoring.network_agree_accounts} other",
        "accounts agree, each counted once per caller: as many whose own last call was bad, with good calls,",
        "or that saw the caller before. One tenant cannot move another tenant's score. An account whose",
        "agreeing history only its path tokens posted (its ingest token, a gate token: events record their",
        "`credential`), never an API key, counts toward `prior_bad` and `prior_good` for"
        f" {rules.scoring.network_token_weight} of an",
        "account: tokens live in URLs that platforms, carriers and their logs hold. `checks` shows the network",
        "part: `network_bad_accounts`, `network_good_accounts`, and of them the token-only",
        "`network_bad_token_accounts`, `network_good_token_accounts`.",
        "",
    ]


def labels_section(rules: Rules) -> list[str]:
    scoring = rules.scoring
    return [
        "## Labels",
        "",
        "A call's label is its owner's latest (`POST /v1/calls/<call_id>/label`, the dashboard's call page), else",
        "its platform's `disposition` on `call.ended`; the owner's wins whenever it comes. In the caller's history a",
        f"labelled call counts by its label instead of its settled score: `good` as a call that settled below"
        f" {scoring.prior_good_below}",
        "(in `prior.good`, toward `prior_good`), `spam` as a bad one (above"
        f" {scoring.prior_good_none_above}: no `prior_good`), which also trips `prior_bad`",
        "for the caller on the labelling account at once and, under Network evidence, on others once at least"
        f" {scoring.network_agree_accounts}",
        "other accounts labelled it spam (or otherwise agree its last call was bad). A later label moves the",
        "counts again. `GET /v1/reputation` `labels` counts the accounts that labelled a call of the number spam,",
        "and good, each at most once. A `quiet` call's label counts in its account's own history only.",
        "",
    ]


def policy_section() -> list[str]:
    return [
        "## Policy",
        "",
        "An account may change the scoring rules for itself: its thresholds, any weight above, and reasons",
        "switched off (`scoring_off` for the whole deployment; any weighted reason, or `prior_good`). It is set",
        "with `callscreen policy set --account A [--review R] [--reject R] [--weight REASON=W ...] [--off REASON",
        "...]` or the dashboard's Policy page; each set replaces the account's policy whole, and a set with no",
        "option restores the deployment's rules. `callscreen policy show` prints every threshold and weight in",
        "effect. A reason switched off, or weighted 0, neither moves a score nor appears in `reasons`; `trusted`",
        "and `blocked` are the owner's own decisions and stay. The policy is a record on the accounts topic,",
        "and the edge stamps it on every `call.started` it appends, so a rebuild scores each start with the",
        "policy it was answered with; a start's `thresholds` are its account's.",
        "",
    ]


def outbound_section(rules: Rules) -> list[str]:
    scoring, detectors = rules.scoring, rules.detectors
    return [
        "## Outbound guard",
        "",
        'An agent about to dial posts `call.started` with `direction: "outbound"` (`from` the protected number,',
        "`to` the number it dials) and dials only on `allow`. Beside the reasons above (a premium-rate or",
        "shared-cost number dialled is `premium_rate_destination`, not `premium_rate_caller`), an outbound start has:",
        "",
        "| reason | signal |",
        "|---|---|",
        "| `destination_not_allowed` | the dialled country is not one of the account's outbound countries"
        " (default: the countries of its protected numbers) |",
        "| `premium_rate_destination` | the dialled number is premium-rate or shared-cost (UAN and toll-free"
        " are not) |",
        "| `transfer_not_allowed` | `attrs.transfer: true` and the number matches no entry of the account's transfer"
        " list (an entry is an exact E.164 number or an E.164 prefix); an empty list allows none |",
        f"| `destination_burst` | this start makes {scoring.burst_numbers} or more of the account's outbound calls"
        f" within {scoring.burst_window_min} min to distinct numbers sharing their first {scoring.burst_digits}"
        " E.164 digits, country code included (`checks.destination_numbers_10m`) |",
        "| `callback_to_one_ring` | the dialled number placed an inbound call to the account in the last"
        f" {scoring.one_ring_window_h} h that ended unanswered within {scoring.one_ring_s} s of its start"
        " (`checks.one_rings_24h`) |",
        "| `outbound_paused` | the account's outbound is paused (below); it stops a trusted number too |",
        "",
        "A reason weighted 1 is a certainty: its start scores 1, action `reject`, with no `prior_good` relief, and",
        "its score does not become the dialled number's history (the account's settings say nothing of the",
        "number). Settings per account: `callscreen outbound set --account A [--countries US,CA] [--transfer",
        "+1415...,+44...] [--pause-on critical|off]` or the dashboard's Outbound page; `callscreen outbound show`.",
        "Kill switch: with `pause_on` `critical` (the default), a `number.spend_exceeded` tipped over by an",
        "outbound call (`data.direction: outbound`) or an `outbound.destination_burst` pauses all outbound starts",
        "of the account (`outbound_paused`) and raises one `outbound.paused` (`data.number`, `cause`, `alert_id`)",
        "until `callscreen outbound resume --account A` or the dashboard's Resume. Settings, pause and resume are",
        "records on the accounts topic, and the edge stamps them on each outbound start, so a rebuild answers it",
        f"again as it was answered. `outbound.destination_burst` cools down per number and prefix for"
        f" {detectors.cooldown_min} min.",
        "",
    ]


def flags_section() -> list[str]:
    lines = ["## Live flags", "", "| flag | raises `call.suspicious` |", "|---|---|"]
    lines += [f"| `{flag}` | {'yes' if flag in ALERT_LEVEL else 'no'} |" for flag in FLAGS]
    return [*lines, ""]


def alerts_section() -> list[str]:
    lines = ["## Alert types", "", "| type | severity |", "|---|---|"]
    lines += [f"| `{kind}` | {severity} |" for kind, severity in SEVERITY.items()]
    lines += [
        "",
        "An alert about one caller (`caller.rate_exceeded`, `call.suspicious`, `call.long_running`) carries",
        "`data.prior`, `{score, days}`: what the caller scored last time and how many days before this call,",
        "when it had a record (the start's `prior.last`).",
    ]
    return [*lines, ""]


def rules_page(rules: Rules | None = None) -> str:
    rules = rules or Rules()
    lines = [INTRO]
    for name in CONCERNS:
        lines += concern_section(name, getattr(rules, name))
    lines += reasons_section(rules) + network_section(rules) + labels_section(rules) + policy_section()
    lines += outbound_section(rules)
    lines += flags_section() + alerts_section()
    return "\n".join(lines).rstrip() + "\n"


def imports(package: str) -> set[str]:
    """The other packages of the project that `package`'s modules import."""
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found |= {name.split(".")[0] for name in names}
    return {name for name in found if name in PACKAGES and name != package}


def layers_graph() -> str:
    """A mermaid picture of which package imports which, drawn from the source."""
    lines = ["```mermaid", "flowchart TD"]
    for package in PACKAGES:
        lines += [f"  {package} --> {target}" for target in sorted(imports(package))]
    return "\n".join([*lines, "```"])


def with_layers(architecture: str) -> str:
    """docs/architecture.md with its layers picture drawn again."""
    head, rest = architecture.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{layers_graph()}\n{END}{tail}"


if __name__ == "__main__":
    RULES.write_text(rules_page())
    ARCHITECTURE.write_text(with_layers(ARCHITECTURE.read_text()))
    sys.stdout.write(f"wrote {RULES} and the layers of {ARCHITECTURE}\n")
