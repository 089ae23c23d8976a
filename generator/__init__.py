"""Workload generators: a workload request -> KernelGraph phases. Knows nothing of hardware.

Entry point: `generator.build.build_workload(setup, setup_path, num_chips) -> Workload`.
Modules: graph (the contract), builder (graphs built like a forward pass, backward derived),
ops (differentiable kernels), llm_layer / llm_common / llm_training / llm_inference (LLMs),
models (ModelSpec / Hugging Face configs; shipped configs in models/), precision,
proto_graph (DataflowGraph proto <-> KernelGraph), dfmodel_gpt (DFModel's GPT layer graph),
dlrm, hpl, fft, gemm, export (graph files, kernels.csv, summary.json).
"""
