"""Hardware rows: dense peaks, citations, and no guessed numbers for unknown devices."""

from __future__ import annotations

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import HARDWARE, cpu_hardware, find_hardware, get_hardware


def test_rows_are_dense_peaks() -> None:
    # Datasheets headline 2:4-sparse tensor FLOPs; the table must hold half of them.
    sparse_headline = {
        "A100-40GB": 624e12,
        "A100-80GB": 624e12,
        "H100-SXM": 1979e12,
        "H200": 1979e12,
        "B200": 4500e12,
        "L40S": 733e12,
        "A40": 299.4e12,
        "MI300X": 2614.9e12,
        "H800": 1979e12,
        "H20": 296e12,  # AIConfigurator's int8/fp8 figure: Hopper's sparse bf16 equals its dense int8
    }
    for name, sparse in sparse_headline.items():
        assert get_hardware(name).bf16_flops == pytest.approx(sparse / 2, rel=0.02), name  # L40S: 362.05 vs 733


def test_published_bandwidths() -> None:
    assert get_hardware("H100-SXM").hbm_bytes_per_s == 3.35e12
    assert get_hardware("H200").hbm_bytes_per_s == 4.8e12
    assert get_hardware("A100-80GB").hbm_bytes_per_s == 2039e9
    assert get_hardware("H100-SXM").intra_node_bytes_per_s == 900e9 / 2  # NVLink, one direction


def test_every_row_cites_a_source() -> None:
    assert set(HARDWARE) == {
        "A100-40GB",
        "A100-80GB",
        "H100-SXM",
        "H200",
        "B200",
        "GB200",
        "RTX-4090",
        "L40S",
        "A40",
        "MI300X",
        "H800",
        "H20",
    }
    for hw in HARDWARE.values():
        assert "https://" in hw.source, hw.name


def test_unknown_hardware_suggests_and_never_guesses() -> None:
    with pytest.raises(RLBenchError, match=r"unknown hardware 'H10'; did you mean 'H100-SXM'"):
        get_hardware("H10")
    assert find_hardware("TPU-v9") is None
    with pytest.raises(RLBenchError, match="cpu_hardware"):
        get_hardware("cpu")


def test_devices_without_a_datasheet_read_here_are_unknown_not_guessed() -> None:
    """L20 has no NVIDIA datasheet or NVIDIA-authored figure that could be read and cited (2026-12-07; the
    figures found are a spec database's and code comments saying "No doc from NVIDIA"): it stays unknown, so a
    run on one gets no prediction rather than a borrowed peak. H800 and H20 cite NVIDIA's AIConfigurator
    system files, and leave unknown what those do not state (FP32; the H20's TDP, where sources disagree)."""
    assert find_hardware("L20") is None
    assert get_hardware("H800").fp32_flops is None and get_hardware("H20").tdp_w is None
    assert get_hardware("H800").intra_node_bytes_per_s == 200e9  # NVLink halved against the H100's 450


def test_aliases() -> None:
    assert get_hardware("h100") is get_hardware("H100-SXM")
    assert get_hardware("NVIDIA H100 80GB HBM3") is get_hardware("H100-SXM")


def test_cpu_row_from_measurements() -> None:
    cpu = cpu_hardware(peak_flops=1e12, mem_bw=5e10)
    assert (cpu.name, cpu.bf16_flops, cpu.hbm_bytes_per_s, cpu.gpus_per_node) == ("cpu", 1e12, 5e10, 1)
    assert cpu.intra_node_bytes_per_s is None and cpu.tdp_w is None and cpu.usd_per_gpu_hour is None
    with pytest.raises(ValueError, match=r"Hardware\.hbm_bytes_per_s"):
        cpu_hardware(peak_flops=1e12, mem_bw=0)
