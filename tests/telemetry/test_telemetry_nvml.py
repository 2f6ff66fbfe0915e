"""The NVML probe driven by a fake nvml module: unit conversions, unsupported readings, NVLink rates."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from rlbench.harness.telemetry import nvml as nvml_reader
from rlbench.harness.telemetry.nvml import GpuProbe, open_gpus


class FakeNvml:
    """Just enough of pynvml: two GPUs, GPU 1 without a temperature sensor, NVLink on GPU 0."""

    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_FI_DEV_NVLINK_LINK_COUNT = 91
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 138, 139

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"nvml error {value}")
            self.value = value

    def __init__(self) -> None:
        self.energy_mj = {0: 5_000_000, 1: 7_000_000}
        self.nvlink_kib = 0
        self.pcie_calls = 0

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=97, memory=41)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=12_500_000_000, total=141_000_000_000)

    def nvmlDeviceGetPowerUsage(self, handle):
        return 512_250  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.energy_mj[handle] += 51_225
        return self.energy_mj[handle]

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return {1: 1980, 2: 3201}[clock]

    def nvmlDeviceGetTemperature(self, handle, sensor):
        if handle == 1:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4  # SW power cap

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        self.pcie_calls += 1
        return 2_000_000 if counter == 0 else 500_000  # KB/s

    def nvmlDeviceGetFieldValues(self, handle, ids):
        def field(value, ok=True):
            return SimpleNamespace(nvmlReturn=0 if ok else 3, valueType=3, value=SimpleNamespace(ullVal=value))

        if ids == [self.NVML_FI_DEV_NVLINK_LINK_COUNT]:
            return [field(2 if handle == 0 else 0)]
        self.nvlink_kib += 1_000_000
        return [field(self.nvlink_kib) for _ in ids]  # each link's TX and RX counter, KiB

    def nvmlShutdown(self):
        pass


def test_gpu_rows_carry_converted_units():
    nvml = FakeNvml()
    probe = GpuProbe(nvml, [0, 1])
    rows = {row["device"]: row for row in probe.sample()}
    assert set(rows) == {0, 1}
    row = rows[0]
    assert row["gpu_util_pct"] == 97 and row["mem_util_pct"] == 41
    assert row["mem_used_gb"] == pytest.approx(12.5)
    assert row["power_w"] == pytest.approx(512.25)
    assert row["energy_j"] == pytest.approx(5051.225)  # mJ -> J
    assert (row["sm_clock_mhz"], row["mem_clock_mhz"], row["temperature_c"]) == (1980, 3201, 61)
    assert row["throttle_reasons"] == 4
    assert (row["pcie_tx_mb_s"], row["pcie_rx_mb_s"]) == (2000, 500)
    assert "nvlink_tx_mb_s" not in row  # first NVLink reading: no delta yet
    assert probe.names() == {0: "NVIDIA H200", 1: "NVIDIA H200"}


def test_unsupported_reading_is_noted_once_and_not_retried():
    nvml = FakeNvml()
    probe = GpuProbe(nvml, [0, 1])
    for _ in range(3):
        rows = {row["device"]: row for row in probe.sample()}
    assert "temperature_c" not in rows[1] and rows[0]["temperature_c"] == 61
    assert [note for note in probe.notes if "temperature" in note] == [
        "gpu 1: temperature not available (nvml error 3); column left empty"
    ]
    assert ("nvlink_tx_mb_s" in rows[0]) and ("nvlink_tx_mb_s" not in rows[1])  # GPU 1 has no links


def test_nvlink_rate_from_counter_deltas(monkeypatch):
    nvml = FakeNvml()
    probe = GpuProbe(nvml, [0])
    clock = iter([100.0, 100.0, 100.5, 100.5])
    monkeypatch.setattr(nvml_reader.time, "time", lambda: next(clock))
    probe.sample()
    row = probe.sample()[0]
    # each call advances every counter by 1e6 KiB; 2 links -> 2e6 KiB more per direction in 0.5 s
    assert row["nvlink_tx_mb_s"] == pytest.approx(2e6 * 1024 / 1e6 / 0.5)
    assert row["nvlink_rx_mb_s"] == pytest.approx(row["nvlink_tx_mb_s"])


def test_pcie_is_read_at_most_once_a_second():
    nvml = FakeNvml()
    probe = GpuProbe(nvml, [0])
    rows = [probe.sample()[0] for _ in range(5)]  # five ticks well within one second
    assert nvml.pcie_calls == 2  # TX and RX, once
    assert "pcie_tx_mb_s" in rows[0] and all("pcie_tx_mb_s" not in row for row in rows[1:])


def test_open_gpus_without_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    monkeypatch.setattr(nvml_reader, "nvidia_driver_present", lambda: True)
    probe, notes = open_gpus()
    assert probe is None
    assert notes == ["nvidia-ml-py is not installed (pip install nvidia-ml-py); sampling the host only"]


def test_no_nvml_note_on_a_machine_without_gpus(monkeypatch, tmp_path):
    """A CPU machine has no GPU to miss: no advice to install nvidia-ml-py."""
    present = nvml_reader.nvidia_driver_present
    (tmp_path / "nvidiactl").touch()  # the control node alone is not a GPU
    assert not present(tmp_path)
    (tmp_path / "nvidia0").touch()
    assert present(tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(nvml_reader, "nvidia_driver_present", lambda: False)
    assert open_gpus() == (None, [])


def test_nvml_that_cannot_start_is_said_only_where_a_gpu_is_there(monkeypatch):
    """On a CPU machine, "NVML unavailable (NVML Shared Library Not Found)" was printed on every run."""

    class NoLibrary(Exception):
        pass

    fake = types.SimpleNamespace(NVMLError=NoLibrary)

    def init():
        raise NoLibrary("NVML Shared Library Not Found")

    fake.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(nvml_reader, "nvidia_driver_present", lambda: False)
    assert open_gpus() == (None, [])
    monkeypatch.setattr(nvml_reader, "nvidia_driver_present", lambda: True)
    assert open_gpus() == (None, ["NVML unavailable (NVML Shared Library Not Found); sampling the host only"])


def test_the_deprecated_pynvml_package_does_not_warn(monkeypatch, tmp_path):
    """Some stacks install `pynvml`, which warns FutureWarning on import in every process (2-3 lines a run)."""
    import warnings

    (tmp_path / "pynvml.py").write_text("import warnings\nwarnings.warn('deprecated', FutureWarning)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from rlbench.harness.telemetry.accelerators import import_pynvml

    real = sys.modules.pop("pynvml", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert import_pynvml().__file__ == str(tmp_path / "pynvml.py")
    finally:  # the stand-in must not outlive the test: later tests import the real module
        sys.modules.pop("pynvml", None)
        if real is not None:
            sys.modules["pynvml"] = real
