"""The live monitor (decisions.md section 8): a pure function from a call's turn events to its picture.

Events are placed by their `at`, not by arrival, and the picture is computed over that timeline:
a flag trips at the first point in event time where its rule holds and stays tripped from there,
so the live score only rises along the call, and the same events in any arrival order give the
same picture. Only lengths, counts and 12-hex hashes are ever here; text never reaches a worker.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field, fields
from typing import Any

from callscreen.settings import Settings

FLAGS = ("recording_likely", "monologue", "barge_storm", "rapid_fire", "repeated_turns", "silent_listener", "one_sided")
ALERT_LEVEL = frozenset({"recording_likely", "barge_storm", "rapid_fire", "repeated_turns", "silent_listener"})
FLAG_WEIGHTS = {
    "recording_likely": 0.60,
    "monologue": 0.30,
    "barge_storm": 0.50,
    "rapid_fire": 0.60,
    "repeated_turns": 0.60,
    "silent_listener": 0.50,
    "one_sided": 0.30,
}


@dataclass(frozen=True)
class LiveThresholds:
    recording_s: float = 45.0
    recording_words: int = 120
    monologue_turns: int = 3
    monologue_s: float = 20.0
    monologue_words: int = 60
    barge_count: int = 6
    barge_window_s: float = 60.0
    rapid_count: int = 8
    rapid_window_s: float = 10.0
    repeat_count: int = 3
    silent_s: float = 60.0
    one_sided_words: int = 200
    one_sided_ratio: float = 0.10


def thresholds_from(settings: Settings) -> LiveThresholds:
    """The thresholds from settings: every `live_<name>` field names one threshold."""
    return LiveThresholds(**{f.name: getattr(settings, f"live_{f.name}") for f in fields(LiveThresholds)})


@dataclass
class Turn:
    role: str
    ended_at: int
    seconds: float | None = None
    words: int | None = None
    hash: str | None = None
    index: int | None = None
    standalone: bool = False


@dataclass
class Picture:
    flags: list[str] = field(default_factory=list)
    score: float = 0.0
    user_turns: int = 0
    agent_turns: int = 0
    interruptions: int = 0
    user_talk_s: float = 0.0
    agent_talk_s: float = 0.0
    user_words: int = 0
    agent_words: int = 0
    first_alert_at: int | None = None

    def body(self) -> dict[str, Any]:
        return {
            "flags": self.flags,
            "score": self.score,
            "user_turns": self.user_turns,
            "agent_turns": self.agent_turns,
            "interruptions": self.interruptions,
        }


def timeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events in call time: by `at`, ties by event id, so arrival order never matters."""
    return sorted(events, key=lambda e: (e["at"], e["id"]))


def _turns(events: list[dict[str, Any]]) -> dict[str, Turn]:
    """Completed turns keyed by the id of the event that completed them."""
    open_starts: dict[str, list[dict[str, Any]]] = {"user": [], "agent": []}
    completed: dict[str, Turn] = {}
    by_index: dict[tuple[str, int], Turn] = {}
    for event in events:
        kind, role = event["type"], event.get("role")
        if kind == "turn.started" and role:
            open_starts[role].append(event)
        elif kind == "turn.ended" and role:
            start = _match(open_starts[role], event.get("turn"))
            seconds = (event["at"] - start["at"]) / 1000 if start is not None else None
            turn = Turn(
                role, event["at"], seconds, event.get("words"), event.get("hash"), event.get("turn"), start is None
            )
            completed[event["id"]] = turn
            if turn.index is not None:
                by_index[(role, turn.index)] = turn
        elif kind == "transcript" and role:
            known = by_index.get((role, event["turn"])) if event.get("turn") is not None else None
            if known is not None:
                known.words = event.get("words", known.words)
                known.hash = event.get("hash", known.hash)
            else:
                completed[event["id"]] = Turn(
                    role, event["at"], None, event.get("words"), event.get("hash"), None, True
                )
    return completed


def _match(starts: list[dict[str, Any]], index: int | None) -> dict[str, Any] | None:
    for position in range(len(starts) - 1, -1, -1):
        if index is None or starts[position].get("turn") == index:
            return starts.pop(position)
    return None


def picture(events: list[dict[str, Any]], started_at: int, start_score: float, th: LiveThresholds) -> Picture:
    """The live picture after every event in `events` (ticks included), walked in call time."""
    ordered = timeline(events)
    turns = _turns(ordered)
    pic = Picture()
    user_started: deque[int] = deque()
    interruptions: deque[int] = deque()
    hashes: Counter[str] = Counter()
    user_done: list[Turn] = []
    agent_spoke = False
    user_spoke = False
    keep = 1.0 - start_score
    for event in ordered:
        at, kind, role = event["at"], event["type"], event.get("role")
        if kind == "turn.started":
            if role == "user":
                pic.user_turns += 1
                user_started.append(at)
            else:
                pic.agent_turns += 1
        elif kind == "interruption":
            pic.interruptions += 1
            interruptions.append(at)
        turn = turns.get(event["id"])
        if turn is not None:
            if turn.standalone:
                if role == "user":
                    pic.user_turns += 1
                else:
                    pic.agent_turns += 1
            if turn.role == "user":
                user_done.append(turn)
                pic.user_talk_s += turn.seconds or 0.0
                pic.user_words += turn.words or 0
                if turn.hash:
                    hashes[turn.hash] += 1
            else:
                pic.agent_talk_s += turn.seconds or 0.0
                pic.agent_words += turn.words or 0
        if role == "user" and kind in ("turn.started", "turn.ended", "transcript"):
            user_spoke = True
        if role == "agent" and kind in ("turn.started", "turn.ended", "transcript"):
            agent_spoke = True
        while user_started and user_started[0] <= at - th.rapid_window_s * 1000:
            user_started.popleft()
        while interruptions and interruptions[0] <= at - th.barge_window_s * 1000:
            interruptions.popleft()
        tripped = {
            "recording_likely": bool(turn and turn.role == "user" and _long(turn, th)),
            "monologue": _monologue(user_done, th),
            "barge_storm": len(interruptions) >= th.barge_count,
            "rapid_fire": len(user_started) >= th.rapid_count,
            "repeated_turns": bool(hashes) and max(hashes.values()) >= th.repeat_count,
            "silent_listener": at - started_at >= th.silent_s * 1000 and agent_spoke and not user_spoke,
            "one_sided": pic.user_words >= th.one_sided_words
            and pic.agent_words <= th.one_sided_ratio * pic.user_words,
        }
        for flag in FLAGS:
            if tripped[flag] and flag not in pic.flags:
                pic.flags.append(flag)
                keep *= 1.0 - FLAG_WEIGHTS[flag]
                if flag in ALERT_LEVEL and pic.first_alert_at is None:
                    pic.first_alert_at = at
    pic.score = round(1.0 - keep, 4) if pic.flags else round(start_score, 4)
    return pic


def _long(turn: Turn, th: LiveThresholds) -> bool:
    return (turn.seconds or 0.0) >= th.recording_s or (turn.words or 0) >= th.recording_words


def _monologue(done: list[Turn], th: LiveThresholds) -> bool:
    if len(done) < th.monologue_turns:
        return False
    timed = [t.seconds for t in done if t.seconds is not None]
    counted = [t.words for t in done if t.words is not None]
    long_talk = bool(timed) and sum(timed) / len(timed) >= th.monologue_s
    many_words = bool(counted) and sum(counted) / len(counted) >= th.monologue_words
    return long_talk or many_words
