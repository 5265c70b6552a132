// The CUDA emulator's cooperative_groups/scan.h: not in its subset (see ../cooperative_groups.h).
#error "cooperative_groups/scan.h is not in the CUDA emulator's subset (dev/cuda/emu/README.md lists what is)"
