"""Where and how a stage runs: the device and precision this machine can run (:mod:`.device`, ``sentlab doctor``;
:mod:`.cuda_builds`: which CUDA build of torch runs on which driver and GPU),
torch.distributed under torchrun (:mod:`.distributed`), timed phases that tools observe (:mod:`.timing`) and
atomic writes (:mod:`.io`). Ground floor: imports nothing of sentlab but :mod:`sentlab.errors`."""
