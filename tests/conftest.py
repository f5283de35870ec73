import os

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

import torch  # noqa: E402

# tiny networks: one thread is as fast, and extra OpenMP threads starve the env workers
torch.set_num_threads(1)
