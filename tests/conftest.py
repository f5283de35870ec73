import os

import torch

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

# tiny networks: one thread is as fast, and extra OpenMP threads starve the env workers
torch.set_num_threads(1)
