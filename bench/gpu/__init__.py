"""The GPU session of docs/GPU.md (session.sh) and what its benchmarks need: utilisation, FLOPs, parity."""
