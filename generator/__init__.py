"""Workload generators: a workload request -> KernelGraph phases. Knows nothing of hardware.

Entry point: `generator.build.build_workload(setup, setup_path, num_chips) -> Workload`.
Modules: graph (the contract), layers (repeated layers found from a graph's bridges),
builder (graphs built like a forward pass, backward derived), ops / ops_attention / ops_loss /
ops_fp8 / ops_eager (differentiable kernels), llm_layer / llm_mla / llm_common /
llm_training / llm_inference (LLMs), models (ModelSpec / Hugging Face configs; shipped
configs in models/), precision, requests (request-field defaults: `request_batch`),
proto_graph / proto_edges (DataflowGraph proto -> KernelGraph; proto_write: the way back),
dfmodel_gpt (DFModel's GPT layer graph), dlrm, hpl, fft, gemm, export (graph files,
kernels.csv, summary.json).
"""
