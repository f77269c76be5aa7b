"""The domain's own cost: the fold phase's kind of records folded in memory, with no Kafka, Faust or RocksDB.

python -m bench.domain_floor --accounts N --calls C
    builds C calls (start and end) over N accounts of 25 numbers as `bench.prefill` does, folds each
    record through `callscreen.testing.Harness` (the call's fold, the feature view, the detectors: the
    worker's domain functions over plain data, the view in a `MemoryStore`) and prints {"records",
    "seconds", "cpu_seconds", "per_s", "cpu_us_per_record"}. Building the records is not timed.

Its rate is the ceiling of any adapter around these folds on this machine: what the worker's fold rate
loses against it is the cost of the adapters (Faust, Kafka's protocol, RocksDB, the tables' layers).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from bench.prefill import records_for
from bench.traffic import BenchAccount, numbers_for, pick
from callscreen.testing import Harness
from infra.clock import now_ms


def measure(accounts: int, calls: int, seed: int = 7) -> dict[str, Any]:
    bench_accounts = [BenchAccount(f"floor{i:05d}", "", numbers_for(i)) for i in range(accounts)]
    rng = random.Random(seed)
    base = now_ms() - 120_000
    records = []
    for i in range(calls):
        account, number = pick(bench_accounts, i)
        records += records_for(account, number, f"floor-{i}", base + i, rng)
    harness = Harness()
    started, cpu_started = time.perf_counter(), time.process_time()
    for record in records:
        harness.fold(record)
    return rates(len(records), time.perf_counter() - started, time.process_time() - cpu_started)


def rates(records: int, seconds: float, cpu: float) -> dict[str, Any]:
    """A floor's result: how many records, in how long, at what rate and CPU cost each."""
    return {
        "records": records,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "per_s": round(records / max(seconds, 1e-9), 1),
        "cpu_us_per_record": round(cpu / max(records, 1) * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accounts", type=int, required=True)
    parser.add_argument("--calls", type=int, required=True)
    args = parser.parse_args()
    print(json.dumps(measure(args.accounts, args.calls)))


if __name__ == "__main__":
    main()
