"""Ray failures as one line (issue 18): joining, lost workers, retries.  No Ray is started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from search.ray_session import (RayWorkerError, describe_ray_error, is_lost_worker,
                                retry_lost_worker)

ROOT = Path(__file__).resolve().parents[2]


def _ray_like(name: str, message: str = "boom") -> Exception:
    cls = type(name, (Exception,), {})
    cls.__module__ = "ray.exceptions"
    return cls(message)


def test_refused_cluster_address_is_one_line_and_fast(tmp_path):
    cfg = ROOT / "experiments" / "sweeps" / "small.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "codesign", "sweep", str(cfg), "--ray-address",
                           "127.0.0.1:1", "--results", str(tmp_path), "--json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    err = json.loads(proc.stdout)
    assert "127.0.0.1:1" in err["error"] and "--ray-address" in err["error"]
    assert "Traceback" not in proc.stderr


def test_lost_worker_errors_are_recognised_and_described():
    oom = _ray_like("OutOfMemoryError", "Task was killed due to the node running low on memory.\n"
                                        "Memory on the node was 7.5GB / 8GB")
    assert is_lost_worker(oom)
    text = describe_ray_error(oom)
    assert "\n" not in text and "out of memory" in text and "fewer workers" in text
    wrapped = _ray_like("RayTaskError", "task failed")
    wrapped.cause = _ray_like("ActorDiedError", "The actor died unexpectedly")
    assert is_lost_worker(wrapped) and "died" in describe_ray_error(wrapped)
    assert not is_lost_worker(ValueError("bad input"))


def test_retry_lost_worker_retries_once_then_one_line_error():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise _ray_like("WorkerCrashedError", "The worker died unexpectedly")
        return 42

    assert retry_lost_worker(flaky, what="optimize") == 42 and len(calls) == 2

    def dead():
        raise _ray_like("WorkerCrashedError", "The worker died unexpectedly")

    with pytest.raises(RayWorkerError) as info:
        retry_lost_worker(dead, what="optimize")
    assert str(info.value).startswith("optimize: a Ray worker died") and "\n" not in str(info.value)

    def bug():
        raise KeyError("not a Ray failure")

    with pytest.raises(KeyError):  # other errors are not retried
        retry_lost_worker(bug, what="optimize")
