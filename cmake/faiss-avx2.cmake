# CMake toolchain file for the one CMake build in the workspace, FAISS (faiss-sys `static`), named by
# `.cargo/config.toml`. faiss-sys builds FAISS's generic target, whose SIMD kernels are chosen at compile time
# (`#ifdef __AVX2__`): without these flags the IVF-PQ list scan, the PQ distance tables and the coarse
# quantizer run SSE code (measured at 10M vectors: docs/bench/history.md, "FAISS built for AVX2").
# The flags are those of FAISS's own `faiss_avx2` target (FAISS_OPT_LEVEL=avx2). The binaries then need an
# x86-64-v3 CPU (Haswell, 2013, or later); `attest` checks at start and says so instead of crashing.
# Editing this file does not rebuild FAISS by itself: `cargo clean -p faiss-sys` does.
set(CMAKE_CXX_FLAGS_RELEASE_INIT "-O3 -DNDEBUG -mavx2 -mfma -mf16c -mpopcnt")
set(CMAKE_C_FLAGS_RELEASE_INIT "-O3 -DNDEBUG -mavx2 -mfma -mf16c -mpopcnt")
