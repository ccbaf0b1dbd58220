"""PyTorch's CUDA reduction order as executable Python, the tests' and evidence's second oracle
for the tail's kernels (cuda_order_model.py); not part of the installed package."""
