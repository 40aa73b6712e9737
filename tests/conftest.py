import os

# Tests run on the CPU with one thread, so timings and results do not depend on the machine.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import torch  # noqa: E402

torch.set_num_threads(1)
