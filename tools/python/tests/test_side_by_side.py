"""tools/python/bench/multiprocess_side_by_side.py runs, with a few requests, and reports what it
says it does: each side's scrapes and totals, the setup each needs, and the cost of an
observation in each library. Its figures are not judged here (docs/workers.md has a run's), only
its shape, and Ringside's totals, which are exact."""

import json
import os
import subprocess
import sys

from conftest import REPOSITORY, _collector_path, _ringside, missing

SCRIPT = os.path.join(REPOSITORY, "tools", "python", "bench", "multiprocess_side_by_side.py")


def test_the_side_by_side_script_runs_and_reports_both_sides():
    for module in ("gunicorn", "prometheus_client"):
        try:
            __import__(module)
        except ImportError:
            missing(f"{module} is not installed (pip install {module})")
    collector = _collector_path()
    if collector is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    requests = 600  # at most 60 a worker: 10 workers at least
    result = subprocess.run([sys.executable, SCRIPT, "--collector", collector, "--requests", str(requests), "--clients", "2",
                             "--rounds", "2", "--calls", "1000", "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["requests"] == requests and report["cpus"] >= 1 and report["cpu"]
    assert "--max-requests 50" in report["gunicorn"]

    prometheus, ringside = report["sides"]
    assert (prometheus["side"], ringside["side"]) == ("prometheus_client", "ringside")
    for side in (prometheus, ringside):
        assert side["failed_requests"] == 0
        assert side["workers_started"] > 4, "the workers recycled"
        assert side["scrapes"] >= 1 and side["scrape_ms_median"] > 0
        assert side["setup"] and all(isinstance(step, str) for step in side["setup"])
        assert side["counter_resets"] >= 0 and side["count_resets"] >= 0
        assert side["final_counter"] == side["final_count"] == requests
    assert abs(prometheus["final_sum"] - requests * 0.001) < 1e-9
    assert (ringside["counter_resets"], ringside["count_resets"]) == (0, 0)
    assert ringside["final_sum"] == requests * 1_000_000 / 1e9  # exact: 1 ms each, in nanoseconds
    assert prometheus["files_left"] >= 1 and ringside["files_left"] >= 1

    rows = {row["row"]: row for row in report["cost"]}
    expected = {"prometheus_client multiprocess", "ringside (pure Python)"} | (
        {"ringside (C extension)"} if _ringside is not None else set())
    assert set(rows) == expected
    assert all(row["ns"] > 0 and row["ratio"] > 0 and row["dropped"] == 0 for row in rows.values())
    assert rows["prometheus_client multiprocess"]["ratio"] == 1
