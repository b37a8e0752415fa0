"""A bounded load run against a model served by Triton (`openinfer gen --emit triton`).

    python tools/bench/triton_load.py --url 127.0.0.1:8001 --model mlp_regression \\
        --input x:f32:8,16 --requests 2000 --clients 8 [--json]

`clients` threads each send requests one after another over gRPC (its own client each) until
`requests` have been sent in all; every latency is timed, every failure counted (a failed request
is retried by no one: it is part of the report). A client that sees a failure waits `backoff_s`
before its next request, as a real client would, so an outage costs a bounded number of requests.
The report: requests that succeeded and failed, throughput over the whole run, p50/p99 latency of
the successful ones, and, where requests failed, the gap: from the first failure to the first
success after it. tests/serving/test_triton_load.py runs it with a check of sampled outputs and
with the model instance's process killed mid-run (the recovery callback reloads the model).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class LoadReport:
    requests: int
    succeeded: int
    failed: int
    clients: int
    seconds: float
    throughput_per_s: float          # successful requests per second over the whole run
    p50_ms: float
    p99_ms: float
    gap_s: float | None              # first failure to the next success (None: nothing failed)
    checked: int                     # successful responses whose outputs were checked

    def text(self) -> str:
        gap = "" if self.gap_s is None else f"; gap {self.gap_s:.2f} s from the first failure to the next success"
        return (f"{self.requests} requests from {self.clients} clients in {self.seconds:.2f} s: {self.succeeded} ok, "
                f"{self.failed} failed; {self.throughput_per_s:.0f} requests/s; latency p50 {self.p50_ms:.2f} ms, "
                f"p99 {self.p99_ms:.2f} ms; {self.checked} outputs checked{gap}")


#: (request number) -> (inputs: {name: array}, check of the outputs or None)
Request = Callable[[int], tuple[dict, Callable[[dict], None] | None]]


def run_load(url: str, model: str, request: Request, outputs: list[str], *, requests: int, clients: int,
             on_failure: Callable[[], None] | None = None, on_request: Callable[[int], None] | None = None,
             backoff_s: float = 0.05, timeout_s: float = 30.0) -> LoadReport:
    """Send `requests` requests from `clients` threads. `on_failure` runs once, in a thread of its
    own, after the first failure (a recovery); `on_request(n)` before request n is sent (say, a
    fault injected at a chosen point)."""
    import tritonclient.grpc as grpcclient

    lock = threading.Lock()
    counter = iter(range(requests))
    latencies: list[float] = []
    events: list[tuple[float, bool]] = []       # (time, succeeded)
    checked = 0
    errors: list[str] = []
    recovery: list[threading.Thread] = []

    wanted = [grpcclient.InferRequestedOutput(o) for o in outputs] or None

    def client_loop():
        nonlocal checked
        client = grpcclient.InferenceServerClient(url)
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            if on_request is not None:
                on_request(n)
            feeds, check = request(n)
            inputs = []
            for name, value in feeds.items():
                inp = grpcclient.InferInput(name, list(value.shape), _triton_type(value.dtype))
                inp.set_data_from_numpy(value)
                inputs.append(inp)
            t0 = time.perf_counter()
            try:
                result = client.infer(model, inputs, outputs=wanted, client_timeout=timeout_s)
                ok = True
            except Exception as e:      # a failed request is counted, whatever the cause
                ok, message = False, str(e)
            t1 = time.perf_counter()
            with lock:
                events.append((t1, ok))
                if ok:
                    latencies.append(t1 - t0)
                else:
                    errors.append(message)
                    if on_failure is not None and not recovery:
                        recovery.append(threading.Thread(target=on_failure, daemon=True))
                        recovery[0].start()
            if ok and check is not None:
                check({o: result.as_numpy(o) for o in outputs})
                with lock:
                    checked += 1
            if not ok:
                time.sleep(backoff_s)

    start = time.perf_counter()
    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    for t in recovery:
        t.join()
    events.sort()
    first_failure = next((t for t, ok in events if not ok), None)
    gap = None
    if first_failure is not None:
        after = next((t for t, ok in events if ok and t > first_failure), None)
        gap = (after - first_failure) if after is not None else float("inf")
    lat = np.array(latencies) * 1e3 if latencies else np.array([float("nan")])
    return LoadReport(requests=requests, succeeded=len(latencies), failed=len(errors), clients=clients,
                      seconds=seconds, throughput_per_s=len(latencies) / seconds, p50_ms=float(np.percentile(lat, 50)),
                      p99_ms=float(np.percentile(lat, 99)), gap_s=gap, checked=checked)


def _triton_type(dtype) -> str:
    from tritonclient.utils import np_to_triton_dtype

    return np_to_triton_dtype(np.dtype(dtype))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="the server's gRPC address, HOST:PORT")
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", action="append", required=True, metavar="NAME:DTYPE:D0,D1",
                    help="one input, random normal values of that numpy dtype and shape (repeatable)")
    ap.add_argument("--output", action="append", default=[], metavar="NAME", help="an output to fetch (repeatable)")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = ap.parse_args(argv)
    specs = []
    for spec in args.input:
        name, dtype, dims = spec.split(":")
        specs.append((name, np.dtype({"f32": "float32"}.get(dtype, dtype)), tuple(int(d) for d in dims.split(","))))
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(shape).astype(dtype) for name, dtype, shape in specs}
    report = run_load(args.url, args.model, lambda n: (feeds, None), args.output,
                      requests=args.requests, clients=args.clients)
    print(json.dumps(asdict(report)) if args.json else report.text())
    return 0 if report.failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
