"""Data parallelism under torchrun: process groups and collectives (distributed), gradient
sync and global BatchNorm (data_parallel)."""
