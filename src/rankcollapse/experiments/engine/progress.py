"""Progress of a sweep: two tqdm bars (runs, layers); silent when disabled."""

from __future__ import annotations

import threading


class Progress:
    """Two bars (runs, layers) from tqdm; silent when ``enabled`` is False. Thread-safe."""

    def __init__(self, runs: int, layers: int, enabled: bool, label: str) -> None:
        self.enabled = enabled
        if enabled:
            from tqdm.auto import tqdm

            self.runs = tqdm(total=runs, desc=f"{label} runs", unit="run", position=0, leave=True)
            self.layers = tqdm(total=layers, desc=f"{label} layers", unit="layer", position=1, leave=False)
        self._lock = threading.Lock()

    def layer(self, n: int = 1) -> None:
        if self.enabled:
            with self._lock:
                self.layers.update(n)

    def run(self) -> None:
        if self.enabled:
            with self._lock:
                self.runs.update(1)

    def close(self) -> None:
        if self.enabled:
            self.layers.close()
            self.runs.close()
