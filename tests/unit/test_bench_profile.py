"""The fold profile's parts: each py-spy sample counted once, in the part its frames say."""

from __future__ import annotations

from pathlib import Path

from bench import profile

ROOT = "_run_module_as_main (<frozen runpy>:198);Worker.execute_from_commandline (mode/worker.py:264)"
AGENT = "Agent._execute_actor (faust/agents/agent.py:698)"
FOLDING = f"{ROOT};{AGENT};register.<locals>.fold_events (processors/folds/calls.py:36)"
FOLD_EVENT = f"{FOLDING};fold_event (processors/folds/calls.py:94)"


def test_each_sample_goes_to_the_first_fold_in_its_stack_else_its_deepest_library(tmp_path: Path) -> None:
    collapsed = tmp_path / "raw.txt"
    collapsed.write_text(
        "\n".join(
            [
                # Under the events fold, its appends through aiokafka included.
                f"{FOLD_EVENT};AIOKafkaProducer.send (aiokafka/producer.py:1) 5",
                f"{FOLD_EVENT};RocksStore.get (processors/state/rocks.py:3) 3",
                # The agent's stream handing the next record over: Faust's, though the agent is ours.
                f"{FOLDING};Commits.folds (processors/folds/commits.py:80);Stream.events (faust/streams.py:9) 4",
                # aiokafka's fetcher, waiting in asyncio below it: the client's.
                f"{ROOT};Fetcher._fetch_requests_routine (aiokafka/consumer/fetcher.py:1);wait (asyncio/tasks.py:1) 2",
                f"{ROOT};heartbeat (processors/housekeeping.py:90) 1",
                # Nothing above the loop: the loop's own C code.
                f"{ROOT} 3",
                f"{ROOT};_on_completion (asyncio/tasks.py:523) 2",
            ]
        )
    )
    found = profile.parts(collapsed)
    assert found["samples"] == 20
    assert dict(found["rows"]) == {
        "folding events: the call, its tables and view, its appends": 40.0,
        "the detector's fold of each fact": 0.0,
        "changelog and view flushes": 0.0,
        "Kafka's client: fetches, produce requests, the protocol": 10.0,
        "Faust and mode: the consumer's drain loop, the conductor, timers": 20.0,
        "the worker's own bookkeeping: commits, progress, barrier, mirror, heartbeats": 5.0,
        "the event loop itself: callbacks and I/O with no Python frame": 15.0,
        "other": 10.0,
    }


def test_top_functions_name_each_function_once_by_its_module(tmp_path: Path) -> None:
    collapsed = tmp_path / "raw.txt"
    collapsed.write_text(f"{FOLD_EVENT} 3\n{FOLDING};fold_event (processors/folds/calls.py:99) 1\n")
    top = profile.top_functions(collapsed)
    assert top["samples"] == 4
    assert top["rows"][0] == ("fold_event (folds/calls.py)", 100.0, 100.0)
