"""A real Triton Inference Server for the tests, assembled from the `nvidia-pytriton` wheel.

The wheel ships `tritonserver`, its Python backend and one `triton_python_backend_stub` per
Python version; tools/dev.sh installs it into a virtual environment of its own (.venv-triton, or
OI_TRITON_VENV: it pins numpy<2). `TritonServer` copies the server tree into a scratch folder
(the backend folder must hold the stub of the interpreter that runs the models), starts it on
free loopback ports with `--model-control-mode=explicit`, waits for `/v2/health/ready`, and stops
it (SIGTERM, then SIGKILL) when the test is done. The stub takes its Python from the first
`python3` on PATH, so the server's environment puts the venv's bin first.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def triton_venv() -> Path:
    return Path(os.environ.get("OI_TRITON_VENV", REPO / ".venv-triton"))


def server_tree() -> tuple[Path, Path, str] | str:
    """(pytriton's tritonserver folder, its libraries, the stub's Python version), or why not."""
    venv = triton_venv()
    python = venv / "bin" / "python3"
    if not python.exists():
        return f"no Triton environment at {venv} (tools/dev.sh installs nvidia-pytriton there)"
    found = list((venv / "lib").glob("python3.*/site-packages/pytriton/tritonserver"))
    if not found:
        return f"{venv} has no nvidia-pytriton (pytriton/tritonserver)"
    tree = found[0]
    version = tree.parents[2].name.removeprefix("python")
    stub = tree / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        return f"nvidia-pytriton has no Python backend stub for Python {version}"
    return tree, tree.parents[1] / "nvidia_pytriton.libs", version


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TritonServer:
    """One tritonserver process over `repository` (models loaded with `load`)."""

    def __init__(self, repository: Path, scratch: Path, *, startup_s: float = 60.0):
        found = server_tree()
        if isinstance(found, str):
            raise RuntimeError(found)
        tree, libs, version = found
        self.home = scratch / "tritonserver"
        if not self.home.exists():
            shutil.copytree(tree, self.home, ignore=shutil.ignore_patterns("python_backend_stubs", "__pycache__"))
            shutil.copy2(tree / "python_backend_stubs" / version / "triton_python_backend_stub",
                         self.home / "backends" / "python")
        self.http_port, self.grpc_port = _free_port(), _free_port()
        self.log_path = scratch / "tritonserver.log"
        env = {**os.environ, "PATH": f"{triton_venv() / 'bin'}:{os.environ.get('PATH', '')}",
               "LD_LIBRARY_PATH": str(libs)}
        env.pop("PYTHONPATH", None)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(self.home / "bin" / "tritonserver"), "--model-repository", str(repository),
             "--backend-directory", str(self.home / "backends"), "--model-control-mode=explicit",
             "--http-address", "127.0.0.1", "--http-port", str(self.http_port),
             "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc_port), "--allow-metrics=false",
             "--exit-timeout-secs", "5"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._wait(lambda: self._get("/v2/health/live") == 200, startup_s, "start")

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 20.0) -> bool:
        """Whether `text` appears in the server's log within `timeout` seconds (a model's log lines
        reach it after the response they follow)."""
        end = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > end:
                return False
            time.sleep(0.1)
        return True

    def _get(self, path: str, data: bytes | None = None) -> int:
        req = urllib.request.Request(f"http://{self.http_url}{path}", data=data,
                                     method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def _wait(self, ready, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited ({self.proc.returncode}) before it could {what}:\n"
                                   + self.log()[-4000:])
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"tritonserver did not {what} within {timeout:g} s:\n" + self.log()[-4000:])

    def load(self, model: str, timeout: float = 60.0) -> None:
        status = self._get(f"/v2/repository/models/{model}/load", b"{}")
        if status != 200:
            raise RuntimeError(f"loading {model}: HTTP {status}\n" + self.log()[-4000:])
        self._wait(lambda: self.model_ready(model), timeout, f"load {model}")

    def unload(self, model: str) -> None:
        self._get(f"/v2/repository/models/{model}/unload", json.dumps({}).encode())
        self._wait(lambda: not self.model_ready(model), 60.0, f"unload {model}")

    def reload(self, model: str) -> None:
        """Recover a model whose backend process died: this Triton does not restart it (requests
        fail, the ready check stays 200), but unloading and loading the model starts a new one."""
        self.unload(model)
        self.load(model)

    def model_ready(self, model: str) -> bool:
        return self._get(f"/v2/models/{model}/ready") == 200

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> TritonServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
