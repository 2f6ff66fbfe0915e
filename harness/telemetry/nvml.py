"""NVML readings for the sampler: one row per GPU per tick, skipping what a GPU does not support.

`open_gpus()` returns a probe, or None plus a note when there is no usable NVML
(nvidia-ml-py missing, no driver, no GPU); the sampler then samples the host only.
A reading a device does not support is dropped for that device after the first
try (one note), so an unsupported call costs nothing on later ticks. The probe
takes the nvml module as an argument so tests can drive it with a fake.

    python -c "from rlbench.harness.telemetry.nvml import open_gpus; p, notes = open_gpus(); \\
        print(notes or p.sample())"
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from rlbench.harness.telemetry.accelerators import import_pynvml, nvidia_driver_present

# nvmlFieldValue_t.valueType -> the union member holding the value
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
PCIE_INTERVAL_S = 1.0  # nvmlDeviceGetPcieThroughput measures over ~20 ms per call: read it sparingly


def open_gpus(devices: Sequence[int] | None = None) -> tuple[GpuProbe | None, list[str]]:
    """(probe, notes); probe is None when NVML cannot be used, and the note says why."""
    try:
        pynvml = import_pynvml()
    except ImportError:
        # Only worth a note where there is a GPU to miss: on a CPU machine host sampling is all there is.
        if not nvidia_driver_present():
            return None, []
        return None, ["nvidia-ml-py is not installed (pip install nvidia-ml-py); sampling the host only"]
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as error:
        if not nvidia_driver_present():  # a CPU machine: no GPU to miss, nothing to say
            return None, []
        return None, [f"NVML unavailable ({error}); sampling the host only"]
    try:
        count = pynvml.nvmlDeviceGetCount()
        indices = list(range(count)) if devices is None else [i for i in devices if 0 <= i < count]
        probe = GpuProbe(pynvml, indices) if indices else None
    except pynvml.NVMLError as error:
        pynvml.nvmlShutdown()
        return None, [f"NVML failed while listing GPUs ({error}); sampling the host only"]
    if probe is None:
        pynvml.nvmlShutdown()
        return None, [f"NVML sees {count} GPU(s), none selected; sampling the host only"]
    return probe, probe.notes


def _unsupported(nvml: ModuleType, error: Exception) -> bool:
    if isinstance(error, AttributeError):  # an older nvidia-ml-py without this call
        return True
    codes = {
        getattr(nvml, name, None)
        for name in ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_NO_PERMISSION")
    }
    return getattr(error, "value", None) in codes - {None}


def _field_value(field: Any) -> float:
    return float(getattr(field.value, _VALUE_MEMBERS[field.valueType]))


class GpuProbe:
    """Reads every selected GPU; `sample()` returns one dict per GPU."""

    def __init__(self, nvml: ModuleType, indices: Sequence[int]) -> None:
        self.nvml = nvml
        self.handles = {index: nvml.nvmlDeviceGetHandleByIndex(index) for index in indices}
        self.notes: list[str] = []
        self._off: set[tuple[int, str]] = set()
        self._pcie_at: dict[int, float] = {}
        self._nvlink_links = {index: self._nvlink_link_count(handle) for index, handle in self.handles.items()}
        self._nvlink_last: dict[int, tuple[float, float, float]] = {}  # index -> (time, tx KiB, rx KiB)
        self._readers: tuple[tuple[str, Callable[[Any], dict[str, Any]]], ...] = (
            ("utilization", self._utilization),
            ("memory", self._memory),
            ("power", self._power),
            ("energy", self._energy),
            ("clocks", self._clocks),
            ("temperature", self._temperature),
            ("throttle_reasons", self._throttle),
        )

    def names(self) -> dict[int, str]:
        names = {}
        for index, handle in self.handles.items():
            try:
                name = self.nvml.nvmlDeviceGetName(handle)
            except self.nvml.NVMLError:
                name = "unknown"
            names[index] = name.decode() if isinstance(name, bytes) else str(name)
        return names

    def driver_version(self) -> str | None:
        """The NVIDIA driver's version string, None if NVML does not say."""
        try:
            value = self.nvml.nvmlSystemGetDriverVersion()
        except self.nvml.NVMLError:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def sample(self) -> list[dict[str, Any]]:
        now = time.time()
        rows = []
        for index, handle in self.handles.items():
            row: dict[str, Any] = {"time_unix_s": time.time(), "device": index}
            for name, read in self._readers:
                row.update(self._try(index, name, read, handle))
            if now - self._pcie_at.get(index, -1e18) >= PCIE_INTERVAL_S:
                self._pcie_at[index] = now
                row.update(self._try(index, "pcie", self._pcie, handle))
            if self._nvlink_links[index]:
                row.update(self._try(index, "nvlink", lambda h, i=index: self._nvlink(i, h, now), handle))
            rows.append(row)
        return rows

    def _try(self, index: int, name: str, read: Callable[[Any], dict[str, Any]], handle: Any) -> dict[str, Any]:
        if (index, name) in self._off:
            return {}
        try:
            return read(handle)
        except (self.nvml.NVMLError, AttributeError) as error:
            if _unsupported(self.nvml, error):
                self._off.add((index, name))
                self.notes.append(f"gpu {index}: {name} not available ({error}); column left empty")
            return {}  # a transient error leaves this tick's cells empty

    def _utilization(self, handle: Any) -> dict[str, Any]:
        rates = self.nvml.nvmlDeviceGetUtilizationRates(handle)
        return {"gpu_util_pct": float(rates.gpu), "mem_util_pct": float(rates.memory)}

    def _memory(self, handle: Any) -> dict[str, Any]:
        return {"mem_used_gb": self.nvml.nvmlDeviceGetMemoryInfo(handle).used / 1e9}

    def _power(self, handle: Any) -> dict[str, Any]:
        return {"power_w": self.nvml.nvmlDeviceGetPowerUsage(handle) / 1e3}  # mW

    def _energy(self, handle: Any) -> dict[str, Any]:
        return {"energy_j": self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3}  # mJ

    def _clocks(self, handle: Any) -> dict[str, Any]:
        nvml = self.nvml
        return {
            "sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        }

    def _temperature(self, handle: Any) -> dict[str, Any]:
        return {"temperature_c": float(self.nvml.nvmlDeviceGetTemperature(handle, self.nvml.NVML_TEMPERATURE_GPU))}

    def _throttle(self, handle: Any) -> dict[str, Any]:
        # "clocks event reasons" is the newer name of the same bitmask (the throttle call is deprecated)
        read = (
            getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return {"throttle_reasons": int(read(handle))}

    def _pcie(self, handle: Any) -> dict[str, Any]:
        nvml = self.nvml
        tx = nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_TX_BYTES)  # KB/s
        rx = nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_RX_BYTES)
        return {"pcie_tx_mb_s": tx / 1e3, "pcie_rx_mb_s": rx / 1e3}

    def _nvlink_link_count(self, handle: Any) -> int:
        try:
            field = self.nvml.nvmlDeviceGetFieldValues(handle, [self.nvml.NVML_FI_DEV_NVLINK_LINK_COUNT])[0]
        except (self.nvml.NVMLError, AttributeError):
            return 0
        return int(_field_value(field)) if field.nvmlReturn == 0 else 0

    def _nvlink(self, index: int, handle: Any, now: float) -> dict[str, Any]:
        """MB/s from the cumulative per-link KiB counters; empty on the first tick (no delta yet)."""
        nvml = self.nvml
        links = range(self._nvlink_links[index])
        ids = [(nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link) for link in links] + [
            (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link) for link in links
        ]
        fields = nvml.nvmlDeviceGetFieldValues(handle, ids)
        failed = [field.nvmlReturn for field in fields if field.nvmlReturn != 0]
        if failed:
            raise nvml.NVMLError(failed[0])
        half = len(fields) // 2
        tx = sum(_field_value(field) for field in fields[:half])
        rx = sum(_field_value(field) for field in fields[half:])
        previous = self._nvlink_last.get(index)
        self._nvlink_last[index] = (now, tx, rx)
        if previous is None or now <= previous[0]:
            return {}
        seconds = now - previous[0]
        return {
            "nvlink_tx_mb_s": (tx - previous[1]) * 1024 / 1e6 / seconds,
            "nvlink_rx_mb_s": (rx - previous[2]) * 1024 / 1e6 / seconds,
        }
