"""The engines' native code paths, chosen from what this machine is and proven here:

- :mod:`~localjury.engines.native.cpu`: what the CPU is and can do;
- :mod:`~localjury.engines.native.attention`: SDPA attention and an in-place KV cache for the
  transformers engine's decode loop;
- :mod:`~localjury.engines.native.llamacpp_kernels`: which llama.cpp kernels run safely here,
  probed in a subprocess.
"""
