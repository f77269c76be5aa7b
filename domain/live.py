"""The live monitor (docs/rules.md, The live monitor): a call's running picture, one turn event at a time.

Events are placed by their `at` (docs/api.md, A call's life), and each costs the same whatever the call's
length. The picture keeps counters, sums and a few short windows (`Running`), never the call's
whole list of events: a checkpoint of everything older than the last `RECENT_KEEP` events, those
events sorted by `at`, and the current picture. An event in order is one more step on the current
picture; one that arrives among the recent events is placed where it belongs and the recent events
are walked again from the checkpoint; one older than all of them is folded into the checkpoint and the
current picture by its `at`: every count, sum and window takes it where it belongs, and a turn's start
and end pair up whichever arrives first. A flag trips at the event (in event time) where its rule first
holds; flags, like the live score, only accumulate.
Only lengths, counts and 12-hex hashes are ever here; text never reaches a worker.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from operator import attrgetter

import msgspec

from domain.events import Tick, Turn
from domain.rules import SECOND_MS, LiveRules

FLAGS = ("recording_likely", "monologue", "barge_storm", "rapid_fire", "repeated_turns", "silent_listener", "one_sided")
ALERT_LEVEL = frozenset({"recording_likely", "barge_storm", "rapid_fire", "repeated_turns", "silent_listener"})
# Bounds of the running picture: far above any rule's count, so no rule loses what it needs.
RECENT_KEEP = 64
WINDOW_KEEP = 64
OPEN_KEEP = 16
HASHES_KEEP = 256
SEEN_KEEP = 256
SAID_KEEP = 32


class Step(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What the picture keeps of one event: its kind, time, id and measurements, never words."""

    type: str
    at: int
    id: str
    role: str = ""
    turn: int | None = None
    words: int | None = None
    hash: str | None = None
    interrupted: bool = False

    @staticmethod
    def of(event: Turn | Tick) -> Step:
        if isinstance(event, Tick):
            return Step("tick", event.at, event.id)
        kind = str(event.__struct_config__.tag)
        return Step(kind, event.at, event.id, event.role, event.turn, event.words, event.hash, bool(event.interrupted))

    @property
    def order(self) -> tuple[int, str]:
        return (self.at, self.id)


class OpenTurn(msgspec.Struct, frozen=True, array_like=True, gc=False):
    at: int
    turn: int | None


class Said(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What a completed turn said, kept by its index (or as the role's latest, without one) so a later
    transcript can correct it."""

    role: str
    turn: int | None
    words: int | None
    hash: str | None


class Running(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """The picture after a run of events, in event time."""

    flags: tuple[str, ...] = ()
    user_turns: int = 0
    agent_turns: int = 0
    interruptions: int = 0
    user_done: int = 0
    user_timed: int = 0
    user_talk_s: float = 0.0
    user_counted: int = 0
    user_words: int = 0
    agent_talk_s: float = 0.0
    agent_words: int = 0
    first_user_at: int | None = None
    first_agent_at: int | None = None
    open_user: tuple[OpenTurn, ...] = ()
    open_agent: tuple[OpenTurn, ...] = ()
    # Ends that came with no start (a turn reported only by its end, or whose start is late), per role.
    ended_user: tuple[OpenTurn, ...] = ()
    ended_agent: tuple[OpenTurn, ...] = ()
    user_starts: tuple[int, ...] = ()
    cut_ins: tuple[int, ...] = ()
    hashes: dict[str, int] = msgspec.field(default_factory=dict)
    said: tuple[Said, ...] = ()


class LiveState(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    checkpoint: Running = msgspec.field(default_factory=Running)
    # The last event folded into the checkpoint: anything older arrived too late to be placed.
    horizon: Step | None = None
    recent: tuple[Step, ...] = ()
    current: Running = msgspec.field(default_factory=Running)
    score: float = 0.0
    # Turn events folded (ticks excluded): the per-call cap counts these.
    written: int = 0
    # Ids of events folded into the checkpoint, the newest `SEEN_KEEP`: the recent steps carry their own,
    # and a call's row is rewritten on each of its events (docs/decisions/0011-smaller-call-rows.md).
    seen: tuple[str, ...] = ()
    # (type, role, turn) of the checkpoint's events that named their turn, the newest `SEEN_KEEP`: a client's
    # retry of one (a new id, after a 503) is the same turn again (`repeated`).
    turn_keys: tuple[str, ...] = ()
    first_alert_at: int | None = None

    @property
    def flags(self) -> tuple[str, ...]:
        return self.current.flags

    @property
    def user_turns(self) -> int:
        return self.current.user_turns

    @property
    def agent_turns(self) -> int:
        return self.current.agent_turns

    @property
    def interruptions(self) -> int:
        return self.current.interruptions


class Folded(msgspec.Struct, frozen=True, gc=False):
    state: LiveState
    # The call's first alert-level flag tripped with this event (it raises `call.suspicious`).
    tripped_alert: bool


_ID = attrgetter("id")


def already_folded(live: LiveState, event_id: str) -> bool:
    return event_id in live.seen or event_id in map(_ID, live.recent)


def turn_key(kind: str, role: str, turn: int | None) -> str | None:
    return None if turn is None else f"{kind}|{role}|{turn}"


def repeated(live: LiveState, event: Turn) -> bool:
    """The same turn event (its type, role and `turn`) folded before under another id: a retry."""
    key = turn_key(str(event.__struct_config__.tag), event.role, event.turn)
    if key is None:
        return False
    return key in live.turn_keys or any(turn_key(s.type, s.role, s.turn) == key for s in live.recent)


def fold(live: LiveState, event: Turn | Tick, started_at: int, start_score: float, rules: LiveRules) -> Folded:
    """The picture after one more event, placed by its `at`."""
    step = Step.of(event)
    checkpoint, horizon, current, recent = live.checkpoint, live.horizon, live.current, list(live.recent)
    seen, turn_keys = live.seen, list(live.turn_keys)
    if not recent or step.order >= recent[-1].order:
        current = advance(current, step, started_at, rules)
        recent.append(step)
    elif horizon is not None and step.order < horizon.order:
        # Older than every event still kept in order: applied where it arrives.
        checkpoint = advance(checkpoint, step, started_at, rules)
        current = advance(current, step, started_at, rules)
        seen = (*seen, step.id)
        turn_keys.append(turn_key(step.type, step.role, step.turn) or "")
    else:
        bisect.insort(recent, step, key=lambda s: s.order)
        current = checkpoint
        for kept in recent:
            current = advance(current, kept, started_at, rules)
    while len(recent) > RECENT_KEEP:
        horizon = recent.pop(0)
        checkpoint = advance(checkpoint, horizon, started_at, rules)
        seen = (*seen, horizon.id)
        turn_keys.append(turn_key(horizon.type, horizon.role, horizon.turn) or "")
    earlier = live.current.flags
    if any(flag not in current.flags for flag in earlier):
        # A walk again from the checkpoint may not trip a flag where it tripped before: it stays.
        current = msgspec.structs.replace(current, flags=(*earlier, *(f for f in current.flags if f not in earlier)))
    keep = 1.0 - start_score
    for flag in current.flags:
        keep *= 1.0 - rules.flag_weights[flag]
    score = round(1.0 - keep, 4) if current.flags else round(start_score, 4)
    first = live.first_alert_at is None and any(f in ALERT_LEVEL for f in current.flags)
    new = LiveState(
        checkpoint=checkpoint,
        horizon=horizon,
        recent=tuple(recent),
        current=current,
        score=max(live.score, score),
        written=live.written + (0 if isinstance(event, Tick) else 1),
        seen=seen[-SEEN_KEEP:],
        turn_keys=tuple(k for k in turn_keys if k)[-SEEN_KEEP:],
        first_alert_at=step.at if first else live.first_alert_at,
    )
    return Folded(new, first)


def advance(running: Running, step: Step, started_at: int, rules: LiveRules) -> Running:
    """One event on a picture, in event time."""
    w = _Working(running)
    completed: Completed | None = None
    if step.type == "turn.started":
        completed = w.start_turn(step)
    elif step.type == "turn.ended":
        completed = w.end_turn(step)
        if step.interrupted and step.role == "agent":
            # An agent turn cut off is the caller's interruption; a caller cut off by the agent is not.
            w.cut_in(step.at)
    elif step.type == "interruption":
        w.cut_in(step.at)
    elif step.type == "transcript":
        completed = w.transcript(step)
    if step.type in ("turn.started", "turn.ended", "transcript"):
        w.spoke(step.role, step.at)
    w.check(step, completed, started_at, rules)
    return w.freeze()


# A turn this event completed (or corrected): its seconds, words and text hash.
Completed = tuple[float | None, int | None, str | None]


class _Working:
    """A mutable copy of a picture while one event is applied."""

    def __init__(self, r: Running) -> None:
        self.flags = list(r.flags)
        self.user_turns, self.agent_turns, self.interruptions = r.user_turns, r.agent_turns, r.interruptions
        self.user_done, self.user_timed, self.user_talk_s = r.user_done, r.user_timed, r.user_talk_s
        self.user_counted, self.user_words = r.user_counted, r.user_words
        self.agent_talk_s, self.agent_words = r.agent_talk_s, r.agent_words
        self.first_user_at, self.first_agent_at = r.first_user_at, r.first_agent_at
        self.open = {"user": list(r.open_user), "agent": list(r.open_agent)}
        self.ended = {"user": list(r.ended_user), "agent": list(r.ended_agent)}
        self.user_starts = list(r.user_starts)
        self.cut_ins = list(r.cut_ins)
        self.hashes = dict(r.hashes)
        self.said = list(r.said)

    def count_turn(self, role: str) -> None:
        if role == "user":
            self.user_turns += 1
        else:
            self.agent_turns += 1

    def start_turn(self, step: Step) -> Completed | None:
        """A turn's start; when its end came first (late), the turn is complete now, with its length."""
        if step.role == "user":
            bisect.insort(self.user_starts, step.at)
            self.user_starts = self.user_starts[-WINDOW_KEEP:]
        end = _take(self.ended[step.role], step.turn, lambda e: e.at >= step.at)
        if end is None:
            self.count_turn(step.role)
            self.open[step.role] = [*self.open[step.role], OpenTurn(step.at, step.turn)][-OPEN_KEEP:]
            return None
        seconds = (end.at - step.at) / SECOND_MS
        if step.role == "user":
            self.user_timed += 1
            self.user_talk_s += seconds
        else:
            self.agent_talk_s += seconds
        return seconds, None, None

    def end_turn(self, step: Step) -> Completed:
        start = _take(self.open[step.role], step.turn, lambda s: True, newest=True)
        if start is None:
            # A turn reported only by its end still counts as a turn; its start may yet come, late.
            self.count_turn(step.role)
            self.ended[step.role] = [*self.ended[step.role], OpenTurn(step.at, step.turn)][-OPEN_KEEP:]
        seconds = (step.at - start.at) / SECOND_MS if start is not None else None
        self.add_said(step.role, seconds, step.words, step.hash)
        self.said = [*self.said, Said(step.role, step.turn, step.words, step.hash)][-SAID_KEEP:]
        return seconds, step.words, step.hash

    def transcript(self, step: Step) -> Completed:
        """A turn's final text, measured: corrects the turn it names (without `turn`, the role's latest);
        with no turn to correct, its words and hash count, and it is a turn only when it names one."""
        known = next(
            (
                i
                for i in range(len(self.said) - 1, -1, -1)
                if self.said[i].role == step.role and (step.turn is None or self.said[i].turn == step.turn)
            ),
            None,
        )
        if known is None:
            if step.turn is not None:
                self.count_turn(step.role)
                self.add_said(step.role, None, step.words, step.hash)
                self.said = [*self.said, Said(step.role, step.turn, step.words, step.hash)][-SAID_KEEP:]
            else:
                self.add_words(step.role, step.words, step.hash)
            return None, step.words, step.hash
        old = self.said[known]
        words = step.words if step.words is not None else old.words
        if words is not None:
            if step.role == "agent":
                self.agent_words += words - (old.words or 0)
            elif old.words is None:
                self.user_counted += 1
                self.user_words += words
            else:
                self.user_words += words - old.words
        if step.hash and step.hash != old.hash:
            if old.hash and step.role == "user" and self.hashes.get(old.hash):
                self.hashes[old.hash] -= 1
            self.add_hash(step.role, step.hash)
        self.said[known] = Said(old.role, old.turn, words, step.hash or old.hash)
        return None, words, step.hash or old.hash

    def add_said(self, role: str, seconds: float | None, words: int | None, text_hash: str | None) -> None:
        if role == "user":
            self.user_done += 1
            if seconds is not None:
                self.user_timed += 1
                self.user_talk_s += seconds
            if words is not None:
                self.user_counted += 1
        else:
            self.agent_talk_s += seconds or 0.0
        self.add_words(role, words, text_hash)

    def add_words(self, role: str, words: int | None, text_hash: str | None) -> None:
        if role == "user":
            self.user_words += words or 0
        else:
            self.agent_words += words or 0
        if text_hash:
            self.add_hash(role, text_hash)

    def add_hash(self, role: str, text_hash: str) -> None:
        if role != "user":
            return
        self.hashes[text_hash] = self.hashes.get(text_hash, 0) + 1
        if len(self.hashes) > HASHES_KEEP:
            # Forget the rarest: a repeat needs the same text several times over.
            rarest = min(self.hashes, key=lambda h: (self.hashes[h], h))
            del self.hashes[rarest]

    def cut_in(self, at: int) -> None:
        self.interruptions += 1
        bisect.insort(self.cut_ins, at)
        self.cut_ins = self.cut_ins[-WINDOW_KEEP:]

    def spoke(self, role: str, at: int) -> None:
        if role == "user":
            self.first_user_at = at if self.first_user_at is None else min(self.first_user_at, at)
        else:
            self.first_agent_at = at if self.first_agent_at is None else min(self.first_agent_at, at)

    def check(self, step: Step, completed: Completed | None, started_at: int, rules: LiveRules) -> None:
        """Trip the flags whose rule holds at this event; each trips once and stays."""
        at = step.at
        user_completed = completed is not None and step.role == "user"
        seconds, words = (completed[0], completed[1]) if completed is not None else (None, None)
        holds = {
            "recording_likely": user_completed
            and ((seconds or 0.0) >= rules.recording_s or (words or 0) >= rules.recording_words),
            "monologue": self._monologue(rules),
            "barge_storm": crowded(self.cut_ins, rules.barge_count, rules.barge_window_s * SECOND_MS),
            "rapid_fire": crowded(self.user_starts, rules.rapid_count, rules.rapid_window_s * SECOND_MS),
            "repeated_turns": bool(self.hashes) and max(self.hashes.values()) >= rules.repeat_count,
            "silent_listener": at - started_at >= rules.silent_s * SECOND_MS
            and self.first_agent_at is not None
            and self.first_user_at is None,
            "one_sided": self.user_words >= rules.one_sided_words
            and self.agent_words <= rules.one_sided_ratio * self.user_words,
        }
        self.flags += [flag for flag in FLAGS if holds[flag] and flag not in self.flags]

    def _monologue(self, rules: LiveRules) -> bool:
        if self.user_done < rules.monologue_turns:
            return False
        long_talk = self.user_timed > 0 and self.user_talk_s / self.user_timed >= rules.monologue_s
        many_words = self.user_counted > 0 and self.user_words / self.user_counted >= rules.monologue_words
        return long_talk or many_words

    def freeze(self) -> Running:
        return Running(
            flags=tuple(self.flags),
            user_turns=self.user_turns,
            agent_turns=self.agent_turns,
            interruptions=self.interruptions,
            user_done=self.user_done,
            user_timed=self.user_timed,
            user_talk_s=round(self.user_talk_s, 3),
            user_counted=self.user_counted,
            user_words=self.user_words,
            agent_talk_s=round(self.agent_talk_s, 3),
            agent_words=self.agent_words,
            first_user_at=self.first_user_at,
            first_agent_at=self.first_agent_at,
            open_user=tuple(self.open["user"]),
            open_agent=tuple(self.open["agent"]),
            ended_user=tuple(self.ended["user"]),
            ended_agent=tuple(self.ended["agent"]),
            user_starts=tuple(self.user_starts),
            cut_ins=tuple(self.cut_ins),
            hashes=self.hashes,
            said=tuple(self.said),
        )


def _take(
    turns: list[OpenTurn], index: int | None, fits: Callable[[OpenTurn], bool], newest: bool = False
) -> OpenTurn | None:
    """Remove and return the kept turn that pairs with `index`: the same index, or, without one, the
    newest (an end's start) or the oldest that `fits` (a late start's end)."""
    order = range(len(turns) - 1, -1, -1) if newest else range(len(turns))
    for position in order:
        kept = turns[position]
        if (index is None and fits(kept)) or (index is not None and kept.turn == index):
            del turns[position]
            return kept
    return None


def crowded(times: list[int], count: int, window_ms: float) -> bool:
    """Whether `count` of the sorted `times` fall within one window of `window_ms`."""
    return any(times[i] - times[i - count + 1] < window_ms for i in range(count - 1, len(times)))
