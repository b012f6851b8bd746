"""How a run is split across GPUs. Introduced now so that every memory function can report per-GPU bytes;
the many-GPU chapters (DP/ZeRO/FSDP, TP/SP/PP) teach and refine it.

Sources: ZeRO stages, Rajbhandari et al. 2020 (Sec. 5, Fig. 1); tensor and sequence parallelism, Shoeybi et al.
2019 (Megatron-LM) and Korthikanti et al. 2022; pipeline parallelism, Narayanan et al. 2021.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_bool, check_int


@dataclass(frozen=True)
class Parallel:
    """A parallel layout: ``tp`` tensor-, ``pp`` pipeline-, ``dp`` data-parallel degree; ``zero`` is the ZeRO
    stage (0-3, FSDP full-shard is stage 3) over the ``dp`` group; ``sp`` turns on sequence parallelism
    (splits the norm/dropout activations that plain TP replicates)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0
    sp: bool = False

    def __post_init__(self):
        check_int("tp", self.tp)
        check_int("pp", self.pp)
        check_int("dp", self.dp)
        check_int("zero", self.zero, minimum=0, maximum=3)
        check_bool("sp", self.sp)
        if self.sp and self.tp == 1:
            raise ValueError("sp=True needs tp > 1: sequence parallelism splits along the tensor-parallel group")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


SINGLE_GPU = Parallel()


def resolve_parallel(parallel: Parallel | None) -> Parallel:
    if parallel is None:
        return SINGLE_GPU
    if not isinstance(parallel, Parallel):
        raise TypeError(f"parallel must be a Parallel(...) or None, got {type(parallel).__name__}")
    return parallel
