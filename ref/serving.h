/* Serving arithmetic (chapter 9): what one GPU of a deployment holds of a model's KV cache per token
 * and per sequence, and how many tokens and sequences of a context fit in the memory it has left for
 * the cache. Everything is derived from the config (config.h) and its footprint (kvtable.h).
 *
 * The rules, each with where it comes from:
 *
 *  - Tensor parallelism over tp ranks splits MHA/GQA's KV heads: a rank holds ceil(Hkv / tp) of
 *    them, and when tp > Hkv each head is replicated on tp / Hkv ranks, so a rank still holds one.
 *    vLLM's ModelConfig.get_num_kv_heads (vllm/config.py, commit c0c2335c) returns
 *    max(1, Hkv // tp), the same count whenever one of tp and Hkv divides the other.
 *  - An MLA/DSA row [c_kv | k_rope] is one latent shared by every head, and V4/V4.1 keep a single
 *    shared KV entry: neither has a head axis to split, so every rank holds the whole row in every
 *    layer (DeepSeek-V2 paper, section 2.1; the same get_num_kv_heads returns 1 for an MLA model: "during
 *    decode it becomes MQA"). This is what data-parallel attention answers.
 *  - Data-parallel attention: each rank attends for its own sequences with whole rows (all KV
 *    heads), so the ranks of a node hold different tokens and a node's tokens are their sum. Without
 *    it the tp ranks of a group hold the same tokens, and a node has gpus / tp such groups.
 *  - The indexer key (V3.2, V4, V4.1) is one head per entry: never split.
 *  - Window rows are W rows per layer per sequence in a ring, bounded whatever the context: they are
 *    counted per sequence, not paged (this project's rule). An MHA model windowed in every layer
 *    (Mistral's sliding_window, kvl_kv_footprint.bounded_tokens) holds at most W tokens of its
 *    per-token rows, paged like any other.
 *  - Pages: a layer that stores one entry per token holds a sequence of T tokens in ceil(T / page)
 *    pages of `page` tokens. A layer compressing M tokens per entry holds ceil(T / M) entries, in
 *    pages of `page` entries: ceil(ceil(T / M) / page) pages (this project's rule; a page counted in
 *    entries, not in the tokens behind them).
 *  - Weights on a rank: the routed and shared experts spread over every GPU of the node (expert
 *    parallelism); the embedding, the head and the dense FFNs split over the tp ranks; attention split
 *    over them too, or whole on every rank under data-parallel attention (SGLang's DP-attention guide:
 *    attention replicated over the DP ranks, experts parallel); norms and routers whole everywhere. A
 *    rank's share of n weights over k ranks is ceil(n / k). This project's rule, for an engine's first-
 *    order layout; engines also keep buffers and graphs that the activation fraction stands for.
 *  - Tokens that fit: the cache budget over the per-token bytes, windows and pages aside, as an
 *    engine sizes its token pool (memory left / bytes of one token's cells). Sequences that fit: the
 *    budget over one sequence's paged bytes plus its window rows, rounded down.
 *
 * The plain engine is the rules above. vLLM and SGLang size the same node by their own code, read at
 * vLLM commit bc8282e6 (vllm/v1/kv_cache_interface.py) and bbf906a8 (vllm/v1/core/kv_cache_utils.py),
 * SGLang commit 001067ff (python/sglang/srt/server_args.py) and d8e428b8
 * (python/sglang/srt/model_executor/cuda_graph_config.py). Both run one engine over the node
 * (tp = gpus); data-parallel attention is SGLang's --enable-dp-attention with dp = gpus, vLLM's
 * --data-parallel-size gpus with tensor parallelism 1 and expert parallelism
 * (vllm/model_executor/layers/fused_moe/config.py, FusedMoEParallelConfig.make, commit 002d6073:
 * with expert parallelism on, the experts' ep size is tp · dp and their tp 1).
 *
 *  - Memory fraction. SGLang: ServerArgs._handle_gpu_memory_settings picks chunked_prefill_size and
 *    the decode CUDA graph max_bs by capacity (8,192 and 512 at tp >= 4 below 160 GiB; 16,384 and 512
 *    above), then reserves, in MiB, 512 + 1.5 max(chunk, 2,048) + tp / 8 · 1,024 + graphs (2 max_bs;
 *    under DP attention 3 max_bs · dp more, and 1.5 max_bs · dp more again when max_bs > 300; 1,536
 *    for an MLA model's piecewise prefill graph, on by default in CudaGraphConfig, ServerArgs
 *    .reserve_for_graph_mb; none for V4 and V4.1: kvl_sglang_prefill_graph_of), at least 10,240
 *    above 60 GiB, and sets mem_fraction_static =
 *    round((capacity - reserve) / capacity, 3). The chunk is the whole one under DP attention too:
 *    ServerArgs._run_resolution_pipeline (001067ff) runs _handle_gpu_memory_settings before
 *    _handle_data_parallelism, which divides chunked_prefill_size by dp
 *    (python/sglang/srt/arg_groups/parallel_hook.py, handle_data_parallelism, commit 008b79d2).
 *    Speculative decoding adds nothing: _handle_gpu_memory_settings at 001067ff has no term for it.
 *    The capacity is nvidia-smi's memory.total in MiB (python/sglang/srt/utils/common.py,
 *    get_nvgpu_memory_capacity, commit 004f0c7a), kvl_gpu_memory_mib. vLLM:
 *    CacheConfig.gpu_memory_utilization, 0.9 of the capacity, less the weights and the peak its
 *    profile run measures (activations, non-torch memory, CUDA graphs): a measured quantity, taken
 *    here as an input.
 *  - Pool. SGLang (ModelRunner.profile_max_num_token): memory after the weights load less
 *    capacity · (1 - mem_fraction_static), over one token's cells in every caching layer. vLLM
 *    (kv_cache_utils.get_num_blocks): what is left over page bytes over layers, whole blocks. Both
 *    round the pool down to whole pages; CUDA context and communication buffers are left out here.
 *  - Rows. An MLA model's FP8 cache is the dense row, latent and RoPE key one E4M3 byte a value
 *    (MLAAttentionSpec.real_page_size_bytes: block · head_size 576 · 1 byte); the 656-byte row with
 *    float32 scales and a bf16 RoPE key is V3.2's sparse format (fp8_ds_mla), for DSA models only.
 *    Default cache dtype: vLLM's "auto" is the model's bf16; SGLang's for a DSA model is fp8_e4m3 on
 *    SM 100 and newer, bf16 below (ServerArgs._set_default_dsa_kv_cache_dtype at 001067ff runs
 *    python/sglang/srt/arg_groups/overrides.py, _dsa_kv_cache_dtype_default, commit 003bbaf9: "auto"
 *    becomes fp8_e4m3 when the major capability is 10 or more), bf16 otherwise.
 *  - Draft layer. With MTP speculation each engine loads the MTP module as a draft model and caches
 *    its layer beside the backbone's (vLLM builds num_nextn_predict_layers decoder layers from index
 *    n_layers, vllm/model_executor/models/deepseek_mtp.py, DeepSeekMultiTokenPredictor, commit
 *    03356f8c, and its KV cache spec holds every attention layer registered in the config, the draft's
 *    beside the target's, vllm/v1/worker/gpu/attn_utils.py, get_kv_cache_spec, commit 001cabc1;
 *    SGLang's draft worker sizes its own pool over num_nextn_predict_layers layers,
 *    ModelRunner.profile_max_num_token's is_draft_worker branch, for the target's tokens): 62 MLA
 *    layers for V3, counted here as one pool of 62 layers a token.
 *  - Weights as laid out. Both keep MLA's fused q_a / kv_a projection whole on every rank (vLLM's
 *    MergedColumnParallelLinear with disable_tp, SGLang's ReplicatedLinear
 *    fused_qkv_a_proj_with_mqa), and a DSA model's indexer whole too (wq_b, wk and weights_proj as
 *    ReplicatedLinear: python/sglang/srt/layers/attention/nsa/nsa_indexer.py, Indexer, commit
 *    005e8bf8; vLLM's Indexer in vllm/model_executor/models/deepseek_v2.py, commit 002d6073, with
 *    wk and weights_proj fused under disable_tp). SGLang under DP attention keeps the embedding whole
 *    (VocabParallelEmbedding enable_tp = not enable_dp_attention) and attention whole (an attention tp
 *    of tp / dp = 1), the head and dense FFNs split over tp (ParallelLMHead on the attention group only
 *    with enable_dp_lm_head, the dense MLP tp 1 only with moe_dense_tp_size 1, both off by default:
 *    python/sglang/srt/models/deepseek_v2.py, DeepseekV2Model, DeepseekV2DecoderLayer and
 *    DeepseekV2ForCausalLM, commit 00114aef). vLLM's data-parallel ranks run tp 1 and hold everything
 *    but the routed experts whole: the shared experts are a DeepseekV2MLP over the tp group (of 1),
 *    outside FusedMoE's expert parallelism (DeepseekV2MoE, deepseek_v2.py at 002d6073). The MTP
 *    module's weights are one more layer shaped as the last (its attention, experts and router, laid
 *    out as theirs) and its own projection and norms, whole everywhere.
 *
 * V4 under the engines. Neither engine follows this project's V4 rules (entries paged in entries,
 * window rows a fixed ring outside the pool): each pages V4's compressed layers in token blocks and
 * keeps the window in its pool. What was read, for V4-Flash's figures:
 *
 *  - The entry, both engines: 448 nope values one E4M3 byte each, 64 bf16 RoPE values, one UE8M0
 *    scale per 64 nope values and a pad byte, 584 B (vLLM's DeepseekV4MultiHeadLatentAttentionWrapper
 *    head_bytes, vllm/model_executor/layers/deepseek_v4_attention.py, commit 0a291a2e, whose
 *    DeepseekV4MLAAttention asserts an FP8 cache and stores it as fp8_ds_mla; SGLang's
 *    DeepSeekV4SingleKVPool.get_bytes_per_token, python/sglang/srt/mem_cache/deepseek_v4_memory_pool.py,
 *    commit 007bddd4). The index key: 128 E4M3 bytes and a float32 scale, 132 B (vLLM's DeepseekV4Indexer
 *    k_cache_head_dim, same file, an FP4 key taking the same memory; SGLang's DSV4PoolConfigurator
 *    counts 132). This project's v4-fp8 key is 68 B.
 *  - vLLM's specs. A compressed layer: MLAAttentionSpec over blocks of 256 tokens (the V4 FlashMLA
 *    kernel's only block, DeepseekV4FlashMLASparseBackend.get_supported_kernel_block_sizes), 256 / M
 *    entries a block, the page padded to 576 B (DeepseekV4MLAAttention.get_kv_cache_spec; CSA's index
 *    keys likewise, DeepseekV4IndexerCache.get_kv_cache_spec). Every layer's window:
 *    SlidingWindowMLASpec of 64-token blocks of 584-byte rows, window W (DeepseekV4SWACache,
 *    vllm/v1/attention/backends/mla/sparse_swa.py, commit 03dc5649): paged per token, not a ring.
 *    Each compressor keeps float32 states, 2 · coff · head_dim a row, in a sliding window of coff · M
 *    rows: blocks of 4 rows for CSA (coff 2), 8 for HCA (CompressorStateCache,
 *    vllm/model_executor/layers/deepseek_compressor.py, commit 0de10a27). The ratio-0 layers cache
 *    their window only.
 *  - vLLM's pool (vllm/v1/core/kv_cache_planning.py, commit 4253bd44). _get_packed_kv_cache_groups
 *    buckets layers of one block size and window; a bucket whose page sizes hold equally many layers
 *    is split into groups of the repeats _approximate_gcd picks (the fewest padded layers, at least
 *    the largest such bucket of several sizes); a block is the widest group's pages
 *    (_get_kv_cache_bytes_per_block), num_blocks = memory // that, and every group draws blocks from
 *    the one pool (_max_memory_usage_bytes_from_groups). V4-Flash: 21 · 37,440 + 21 · 8,640 + 20 ·
 *    1,728 = 1,002,240 B a block of 256 tokens. At decode a window group holds the blocks its last W
 *    tokens span, ceil((W - 1) / block) + 1 (the "+1" of SlidingWindowSpec.max_memory_usage_bytes,
 *    vllm/v1/kv_cache_interface.py, commit 001cabc1): 26 blocks a sequence for V4-Flash.
 *  - SGLang's pool (DSV4PoolConfigurator, python/sglang/srt/model_executor/pool_configurator.py,
 *    SGLang 0.5.23; an earlier reading at commit 003fca80 took unpadded rows and the C4 states per
 *    window). Every slot is a padded page's share (_get_paged_kv_bytes_per_token, KVLayout.page_bytes
 *    of V4's 584 B in pages to 576 B): 585 B at 256 and 64 tokens, 864 at 2 (an HCA page).
 *    _get_bytes_per_full_token: the window pool, swa_full_tokens_ratio of the full tokens, a slot in
 *    every layer and the C4 compressor states (main and indexer, float32) at ring 8 / page 256 of
 *    its slots (_get_bytes_per_swa_token); a C4 slot and index key over 4, a C128 slot over 128
 *    (_compressed_bytes_per_full_token); 7,086.75 B for V4-Flash. calculate_pool_sizes first sets
 *    aside the C128 states (_get_c128_state_fixed_bytes: a ring of 128 rows per request slot,
 *    max_running_requests + 1 slots, one ring and a null row more, in rows of 128), then full tokens
 *    = what is left / those bytes, in pages of 256. The defaults: page_size 256 and
 *    swa_full_tokens_ratio 0.1 (_deepseek_v4_overrides, arg_groups/model_overrides/deepseek_v4.py,
 *    at 0.5.23 as at commit 01a4a991), max_running_requests 256 (apply_deepseek_v4_defaults,
 *    arg_groups/deepseek_v4_hook.py, likewise at commit 006cbb66), a DP-attention worker its share;
 *    the ring sizes (get_compress_state_ring_size, mem_cache/deepseek_v4_memory_pool.py).
 *  - Weights: both keep V4's wq_a and wkv, d · (Dq' + Dh) a layer, whole on every rank (vLLM's
 *    DeepseekV4Attention fused_wqa_wkv with disable_tp, vllm/model_executor/models/deepseek_v4.py,
 *    commit 023da1fc; SGLang's MQALayer ReplicatedLinear wq_a and wkv,
 *    python/sglang/srt/models/deepseek_v4.py, commit 000328a8). vLLM keeps its compressors' and
 *    indexer's projections whole too (disable_tp, ReplicatedLinear), not counted here. SGLang's
 *    reserve for V4 and V4.1 (read at 0.5.23, arg_groups/memory_hook.py
 *    _handle_gpu_memory_settings and reserve_for_graph_mb, whose terms for the MLA and MHA models
 *    above agree with 001067ff's) has no prefill-graph term: the breakable prefill graph, on by
 *    default on CUDA, is turned off for DeepSeek-V4 without prefill context parallelism
 *    (disable_breakable_cudagraph_if_incompatible, arg_groups/cuda_graph_hook.py) before the
 *    reserve is sized, and V4's ModelConfig arch is MHA besides.
 *  - The MTP draft. vLLM gives the layer past the backbone ratio 1 (DeepseekV4Attention,
 *    deepseek_v4.py, commit 023da1fc): one more window layer in its window bucket. SGLang doubles
 *    its state rings (16 and 256, get_compress_state_ring_size) and inflates a full token's bytes by
 *    (layers + 1) / layers for the draft worker, one draft layer (_get_bytes_per_full_token,
 *    _assert_ring_serves_draft_tokens). The plain engine does not price V4's draft.
 *
 * V4.1 under the engines. vLLM 0.34.0 (the released wheel) serves V4.1 through its packed planner
 * with V4.1's specs, on Hopper and on SM 100; SGLang 0.5.23 sizes it with V4's pool configurator.
 * The vLLM files are named as in its repository, each read in 0.34.0.
 *
 *  - vLLM's attention class (vllm/models/deepseek_v41/nvidia/model.py, _select_dsv4_attn_cls; read
 *    first at commit 0130d488): FlashMLA everywhere but SM 12x (FlashInfer) and SM 100, where mega
 *    attention is the default where DeepseekV4MegaAttnAttention.is_available_for allows it
 *    (vllm/models/deepseek_v41/nvidia/flash_mla_mega_attn.py: SM 10x, tp dividing the heads and the
 *    o_groups, WV_GROUP_SIZE 8 heads a rank's wo_a group). V4.1-Flash's 64 heads in 8 o_groups keep
 *    8 a group at every tp dividing 8, so mega attention serves its tp-8 and tp-1 ranks; a tp it
 *    declines falls back to FlashMLA's pool, refused by name, not priced.
 *  - vLLM's V4.1 records (DeepseekV4Attention.__init__, vllm/models/deepseek_v41/attention.py; read
 *    first at 02ee13be and f5d3794f). Below SM 100 V4's 584-byte record for the compressed entries
 *    and the window alike, pages rounded up to 576 B; from SM 100 (_use_v41_mxfp8_kv_record) a
 *    528-byte MXFP8 window record (512 E4M3 values, 16 UE8M0 scales) and, under mega attention,
 *    whose packed_kv_cache_dtype an unspecific --kv-cache-dtype resolves to, a 288-byte NVFP4
 *    compressed one (nvfp4_ds_mla: 256 B of e2m1 pairs, 32 E4M3 scales), pages rounded up to 512 B:
 *    serving's v4-fp8 and v41-fp4. The index key stays FP8 with a float32 scale, 132 B, on both:
 *    the indexer's "auto" dtype is fp8 (dsa_indexer_uses_fp4, vllm/v1/attention/backends/mla/
 *    indexer.py), where v41-fp4's own is the 68-byte MXFP4 key.
 *  - vLLM's V4.1 specs. Only KV sources (Full layers) own compressed entries: an MLAAttentionSpec
 *    (DeepseekV4Attention.get_kv_cache_spec) of the cache's block size with tokens_per_state = the
 *    ratio M and state_content_bytes = the record, so a page is block / M records
 *    (AttentionSpec.num_states and page_size_bytes, vllm/v1/kv_cache_interface.py), rounded up to
 *    the alignment (_apply_alignment_padding); Reindex and Reuse layers read the source's cache.
 *    The index keys: a DeepseekV4IndexerCache on each source that is an index source too, the same
 *    page rule; the other index sources reuse it. The block size (Platform
 *    .update_block_size_for_backend, vllm/platforms/interface.py): vLLM's default 64 where every
 *    backend takes it, else the least common kernel block; the V4.1 FlashMLA and indexer backends
 *    take 64-token blocks on Hopper and 128 from SM 100, mega attention 128, the window cache any
 *    multiple of 32 (DeepseekV4SparseMLABackend, FlashMLAMegaAttnBackend and
 *    DeepseekV41IndexerBackend .get_supported_kernel_block_sizes): 64 on Hopper, 128 on SM 100.
 *    Every backbone layer's window: DeepseekV4SWACache's SlidingWindowMLASpec of 32-token blocks of
 *    the window record (vllm/v1/attention/backends/mla/sparse_swa.py). A ratio-2 source's compressor
 *    keeps its open group's rows, kv and score, 2 · 512 float32, in a CircularBufferSpec ring of
 *    max(8, a power of two ≥ drafts + 2) rows with no alignment, 32,768 B, one block a sequence
 *    (CompressorStateCache, vllm/models/deepseek_v41/compressor.py); ratio 1 has none. On SM 100 the
 *    window spec asks a block stride of lcm(528, 288) = 3,168 B (FlashMLA reads both records as rows
 *    of one cache) and the index keys one of 256 B (DeepGEMM's paged sparse logits, on by default on
 *    SM 100 for a model with candidate blocks, _indexer_sparse_logits_supported in
 *    vllm/model_executor/models/config.py, with the DeepGEMM and DeepSelect kernels the wheel ships).
 *  - vLLM's V4.1 pool (vllm/v1/core/kv_cache_planning.py, _get_packed_kv_cache_groups and
 *    _get_kv_cache_bytes_per_block). Every compressed record and key shares one block size, and
 *    UniformTypeKVCacheSpecs.is_uniform_type asks no more of FullAttentionSpecs: one bucket of four
 *    page sizes, 3, 3, 1 and 1 layers for V4.1-Flash, no repeating pattern, kept whole. With no
 *    bucket of several sizes repeating there is no repeat count, so the window and ring buckets are
 *    state buckets, split only as far as the block the whole bucket already needs. Hopper: 3 ·
 *    19,008 + 3 · 4,608 + 37,440 + 8,640 = 116,928 B a block of 64 tokens, 1,827 B a token; 6
 *    window layers a group, 7 groups, and the 3 rings in one: 7 · (⌈127 / 32⌉ + 1) + 1 = 36 window
 *    and ring blocks a sequence. SM 100: 3 · 18,432 + 3 · 8,704 + 36,864 + 16,896 = 135,168 B,
 *    rounded up to lcm(3,168, 256) = 25,344, 152,064 B a block of 128 tokens, 1,188 B a token; 8
 *    window layers a group, 5 groups, the rings in one: 26 blocks a sequence. (Read at commit
 *    02ee13be, a source's block held 64 records, 64 · M tokens, so the ratios never shared a
 *    bucket: 138,240-byte blocks, 3,240 B a token and 71 blocks a sequence on Hopper.)
 *  - vLLM's weights: V4.1's wq_a and wkv fused whole on every rank as V4's (fused_wqa_wkv with
 *    disable_tp, attention.py at 02ee13be); its compressor and indexer projections whole too, not
 *    counted here. Its draft is DSpark (vllm/models/deepseek_v41/nvidia/dspark.py), not MTP layers:
 *    not priced.
 *  - SGLang 0.5.23 (the PyPI release; paths under python/sglang/srt/). configs/deepseek_v41.py maps
 *    DeepseekV41ForCausalLM to DeepseekV4ForCausalLM (the commits read before, 85f8105f and
 *    f45a34e4, did too, but there the V4 model asserted ratios 0, 4 and 128: MQALayer.__init__,
 *    models/deepseek_v4.py at f8101ac7). At 0.5.23 V4's DSV4PoolConfigurator
 *    (model_executor/pool_configurator.py) sizes V4.1, with V4's defaults (page_size 256,
 *    kv_cache_dtype fp8_e4m3, max_running_requests 256: arg_groups/model_overrides/deepseek_v4.py,
 *    arg_groups/overrides.py _deepseek_v4_kv_cache_dtype, arg_groups/deepseek_v4_hook.py
 *    apply_deepseek_v4_defaults). Only KV sources own compressed storage
 *    (collect_sources_by_ratio, mem_cache/deepseek_v4_memory_pool.py). A full token costs a ratio-M
 *    source (slot + FP4 index key) / M (_compressed_bytes_per_full_token;
 *    get_dsv4_indexer_bytes_per_token with use_fp4_indexer: d / 2 + d / 32 = 68 B), a slot being a
 *    padded page's share (KVLayout.page_bytes, sglang/kernels/ops/attention/dsv4/kv_layout.py).
 *    The layout (select_dsv4_kv_layout): V4's 584 B, pages to 576 B, everywhere but the flashmla_mega
 *    backend, which _default_dsv4_attention_backend picks for V4.1 on SM 100 with an fp8_e4m3 cache
 *    when attention is not tensor-parallel; there the window pool is V41 (528 B, pages to 512 B) and
 *    the ratio-1 and ratio-2 pools V41_FP4 (288 B, pages to 256 B; resolve_compressed_kv_layout):
 *    890 B a token for V4.1-Flash. V4.1 leaves swa_full_tokens_ratio unset (V4's override sets 0.1),
 *    so the window is sized in cap mode (_resolve_swa_cap_tokens): compute_swa_request_cap's W +
 *    SGLANG_SWA_EVICTION_INTERVAL (128) + 2 pages a request, two prefill chunks (the overlap
 *    schedule; a DP rank's share of chunked_prefill_size) and a page, plus 4 radix prefix tails a
 *    request of W + a page (_resolve_swa_prefix_tails), page-aligned, in every backbone layer: fixed
 *    bytes (_get_swa_fixed_bytes), set aside with the ratio-2 sources' pair states
 *    (_get_c2_state_fixed_bytes: round_up(2 · (running + 1) + 3, 2) rows of 2 · head_dim float32)
 *    and the page padding at whole pages of full tokens (_get_low_ratio_kv_padding_bytes: a page of
 *    slots and page / M + one index page of keys a source; index pages of 64 slots, 128 from SM 100
 *    with DeepGEMM's paged sparse MQA logits, dsv41_index_page_size). The draft is DSpark only
 *    (validate_deepseek_v41_features): not priced.
 *  - SGLang's running cap: both V4 and V4.1 run at most max_running_requests sequences, 256 a node
 *    (256 / gpus a worker under DP attention); a rank's sequences are capped there. */
#ifndef KVL_SERVING_H
#define KVL_SERVING_H

#include <stddef.h>

#include "config.h"
#include "kvtable.h"
#include "params.h"

typedef enum { KVL_ENGINE_PLAIN, KVL_ENGINE_VLLM, KVL_ENGINE_SGLANG } kvl_engine;
typedef enum { KVL_GPU_H100, KVL_GPU_H200, KVL_GPU_B200 } kvl_gpu;

typedef struct {
    size_t gpus;        /* GPUs in one node */
    size_t tp;          /* tensor-parallel degree of attention; divides gpus and n_heads */
    int dp_attention;   /* 1: each rank attends for its own sequences, with whole rows */
    size_t page;        /* entries per page of every paged layer */
    kvl_engine engine;  /* whose layout and sizing; plain: this header's first rules */
    size_t draft_layers;  /* MTP layers cached beside the backbone under speculation; 0: none */
    int sm;               /* the GPU's SM generation (9 Hopper, 10 Blackwell): an engine's layouts */
    double capacity_mib;  /* the GPU's memory an engine sizes its chunks by; 0: not given */
} kvl_deployment;

/* What an engine reserves and leaves for the cache on one GPU. */
typedef struct {
    double fraction;      /* SGLang's mem_fraction_static, vLLM's gpu_memory_utilization; plain: 1 - F */
    double reserved_mib;  /* SGLang's reserve (MiB) that fixed the fraction; 0 for the others */
    double cache_bytes;   /* the pool: capacity · fraction - weights (- vLLM's profiled peak) */
} kvl_engine_budget;

#define KVL_N_LAYER_KINDS (KVL_LAYER_REUSE + 1)

/* What one rank (one GPU) stores, after the split. */
typedef struct {
    size_t kv_heads;                   /* KV heads a rank holds (MHA/GQA); 0 for a latent or shared row */
    size_t main_row_bytes;             /* one entry of the main attention, on one rank */
    size_t index_key_bytes;            /* one indexer key (whole on every rank) */
    double bytes_per_token;            /* Σ over global layers of (row + key) / M, on one rank */
    double kind_bytes[KVL_N_LAYER_KINDS];   /* bytes_per_token's share of each layer kind */
    size_t kind_layers[KVL_N_LAYER_KINDS];  /* layers of each kind (caching or not) */
    double draft_bytes_per_token;      /* the MTP layers' share of bytes_per_token (d.draft_layers) */
    size_t window_bytes_per_sequence;  /* W rows in every layer, on one rank */
    size_t bounded_tokens;             /* tokens a sequence keeps at most (footprint's; 0: all) */
    size_t groups_per_node;            /* ranks of a node holding different tokens: gpus / tp, or gpus */
    double pool_fixed_bytes;           /* set aside before the pool: SGLang's state rows and V4.1 window
                                          slots; else 0 */
    size_t running;                    /* sequences a group runs at once (SGLang's V4 and V4.1
                                          max_running_requests, a node's 256 over its groups); 0: no cap */
    kvl_cache_layout cache;            /* the layout the rank stores: the model's, unless its engine
                                          picks one per split (SGLang's V4.1 on SM 100) */
} kvl_rank_cache;

/* How much of a budget one GPU and one node fill. */
typedef struct {
    double sequence_bytes;       /* one sequence of the context on one rank: paged rows + window */
    double tokens_per_gpu;       /* floor(budget / bytes_per_token), whole pages for an engine */
    double tokens_per_node;      /* tokens_per_gpu · groups_per_node */
    double sequences_per_gpu;    /* floor(budget / sequence_bytes), at most the rank's running */
    double sequences_per_node;   /* sequences_per_gpu · groups_per_node */
} kvl_fit;

/* KVL_EINVAL, the message naming the field and its value, for zero gpus, tp or page, a tp that does
 * not divide gpus or the model's n_heads (query heads). */
int kvl_deployment_check(const kvl_deployment *d, const kvl_model *m);

/* KV heads one of tp ranks holds: ceil(n_kv_heads / tp), at least 1 (replicated past n_kv_heads). */
size_t kvl_rank_kv_heads(size_t n_kv_heads, size_t tp);

/* Entries a layer allocates for T tokens at M tokens per entry: ceil(ceil(T / M) / page) · page. */
size_t kvl_paged_entries(size_t T, size_t M, size_t page);

/* r = what one rank of d stores of model m with footprint f (kvl_kv_footprint_of). KVL_EINVAL as
 * kvl_deployment_check. */
int kvl_rank_cache_of(kvl_rank_cache *r, const kvl_model *m, const kvl_kv_footprint *f, const kvl_deployment *d);

/* The rows one sequence keeps on a rank however long it grows: V4's and V4.1's W window rows in
 * every layer, or, for a model windowed in every layer (Mistral: bounded_tokens = W), its W tokens
 * of per-token rows, paged; 0 for a cache that grows with the context. kvtable's window B/seq, per
 * rank. */
double kvl_rank_window_bytes(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d);

/* Bytes one rank allocates for one sequence of T tokens (at most bounded_tokens of them kept): each
 * global layer's paged entries times its row (and key), plus the window rows. */
double kvl_rank_sequence_bytes(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d, size_t T);

/* Bytes of weights one GPU of d holds of a model with parameters p, its linear weights stored as
 * `linear` and its experts as `experts` (kvl_params_bytes), split as the rules above say. */
double kvl_rank_weight_bytes(const kvl_params *p, const kvl_deployment *d, kvl_weight_format linear,
                             kvl_weight_format experts, int scale_e8m0);

/* "plain", "vllm", "sglang" and "h100", "h200", "b200"; the reverse → KVL_OK, else KVL_EINVAL. */
const char *kvl_engine_name(kvl_engine e);
int kvl_engine_from_name(const char *name, kvl_engine *out);
const char *kvl_gpu_name(kvl_gpu g);
int kvl_gpu_from_name(const char *name, kvl_gpu *out);

/* The card's memory.total as nvidia-smi reports it, MiB (what SGLang's get_nvgpu_memory_capacity
 * reads): 81,559 for the H100 SXM 80 GB, 143,771 for the H200, 183,359 for the B200, as public
 * nvidia-smi listings of these cards show; not the datasheets' 80, 141 and 192 GB. vLLM reads the CUDA
 * runtime's total instead (vllm/v1/worker/utils.py, request_memory, commit 0027b027: the
 * MemorySnapshot's total · gpu_memory_utilization), which torch's out-of-memory messages print 0.3
 * to 0.7 GiB lower, by driver (79.15 to 79.33 GiB for an H100, 139.80 for an H200, 178.35 for a
 * B200): --memory-gib gives vLLM its own reading. And the compute capability's major version (9
 * Hopper, 10 Blackwell). */
double kvl_gpu_memory_mib(kvl_gpu g);
int kvl_gpu_sm_major(kvl_gpu g);

/* The cache layout engine e stores for m on a GPU of SM major `sm`, asked for `asked` (-1: the
 * engine's default). Plain: the config's own or the one asked. vLLM and SGLang price MHA, MLA, DSA
 * and V4 models, and V4.1; an MLA model's FP8 row is mla-fp8, a DSA model's v32-fp8, V4's v4-fp8
 * (its only row), V4.1's v4-fp8 below SM 100 and under vLLM v41-fp4 from SM 100 (SGLang's rank
 * takes v41-fp4 under DP attention on SM 100, v4-fp8 otherwise). KVL_EINVAL naming the file and the
 * layout for a layout the engine does not store for that model on that GPU, and a V4 compress ratio
 * other than 0, 4 and 128 or a V4.1 one other than 0, 1 and 2. */
int kvl_engine_cache_layout(kvl_cache_layout *out, kvl_engine e, const kvl_model *m, int sm, int asked);

/* Tokens a page holds under engine e's default attention backend for m on a GPU of SM major `sm`
 * (the plain engine has none: 0, the deployment's --page). SGLang: page_size 1 unless the backend
 * forces one (ServerArgs._handle_page_size), and its defaults force 64 for a DSA model (the nsa
 * backend's pages) and for an MLA model from SM 100 (trtllm_mla); fa3 on Hopper takes pages of 1.
 * vLLM: its block size, 64 for FlashMLA (MLA and DSA on Hopper, DSA's sparse kernel everywhere),
 * 128 for CUTLASS MLA (MLA from SM 100), 16 for an MHA model's FlashAttention. A V4 model: 256 in
 * both (vLLM's V4 FlashMLA kernel, SGLang's dsv4 page_size), and V4.1 under SGLang. V4.1 under
 * vLLM 0.34.0: its cache block, 64 tokens below SM 100 and 128 from SM 100 ("V4.1 under the
 * engines"). */
size_t kvl_engine_page(kvl_engine e, const kvl_model *m, int sm);

/* V4's entry under both engines: nope FP8 one byte a value, the RoPE key bf16, one UE8M0 scale per
 * 64 nope values and a pad byte (448 + 128 + 7 + 1 = 584 for V4-Flash); and its index key, FP8 with
 * a float32 scale per 128 values (128 + 4 = 132). */
size_t kvl_v4_engine_row_bytes(const kvl_model *m);
size_t kvl_v4_engine_index_key_bytes(const kvl_model *m);

/* vLLM's V4 and V4.1 pools, as its packed layout groups their cache layers (ref/serving.h, "V4
 * under the engines", "V4.1 under the engines"). */
typedef struct {
    size_t repeats;           /* layers of each page size in one group of a split bucket; 0: none split */
    size_t block_bytes;       /* bytes of one block: its widest group's pages, the pool's divisor */
    size_t compressed_bytes;  /* one group of each full bucket: V4's 256 tokens of CSA and HCA pages */
    double token_blocks;      /* blocks the full groups draw a token: V4 1 / 256, V4.1 1 / its block */
    size_t window_blocks;     /* blocks one sequence's window groups and state rings hold at decode */
} kvl_vllm_v4_blocks;

/* m's pool (V4, or V4.1 in the layout kvl_engine_cache_layout gives it under vLLM: v4-fp8 below SM
 * 100, v41-fp4 from SM 100) with `draft_layers` MTP layers cached beside V4's backbone (each a
 * window-only layer). */
void kvl_vllm_v4_blocks_of(kvl_vllm_v4_blocks *out, const kvl_model *m, size_t draft_layers);

/* SGLang's V4 pool: the bytes of one full token across its pools (DSV4PoolConfigurator
 * ._get_bytes_per_full_token), and the C128 compressor-state rows it sets aside for `running`
 * requests of a worker (_get_c128_state_fixed_bytes); `speculative`: with an MTP draft worker. */
double kvl_sglang_v4_bytes_per_token(const kvl_model *m, int speculative);
double kvl_sglang_v4_state_bytes(const kvl_model *m, size_t running, int speculative);

/* What SGLang reserves for its prefill CUDA graph (reserve_for_graph_mb): 8 MiB a captured size up
 * to the chunk for a model its ModelConfig does not give the MLA arch, 1,536 MiB for one it does,
 * nothing where the breakable prefill graph is off by default. */
typedef enum {
    KVL_SGLANG_PREFILL_GRAPH_SIZES,
    KVL_SGLANG_PREFILL_GRAPH_MLA,
    KVL_SGLANG_PREFILL_GRAPH_NONE
} kvl_sglang_prefill_graph;

/* m's prefill graph under SGLang 0.5.23: MHA models capture sizes; MLA and DSA models (AttentionArch
 * .MLA, configs/model_config.py) the MLA term; V4 and V4.1 none, their breakable prefill graph off
 * without prefill context parallelism (disable_breakable_cudagraph_if_incompatible,
 * arg_groups/cuda_graph_hook.py, which handle_cuda_graph_config runs before
 * handle_gpu_memory_settings sizes the reserve; their ModelConfig arch is MHA besides). */
kvl_sglang_prefill_graph kvl_sglang_prefill_graph_of(const kvl_model *m);

/* SGLang's reserve in MiB on a GPU of `capacity_mib`, one engine over tp GPUs, dp of them attending
 * for their own sequences under DP attention (dp_attention), with prefill graph g. */
double kvl_sglang_reserved_mib(double capacity_mib, size_t tp, int dp_attention, size_t dp,
                               kvl_sglang_prefill_graph g);

/* mem_fraction_static: round((capacity - reserve) / capacity, 3). */
double kvl_sglang_mem_fraction(double capacity_mib, double reserved_mib);

/* out = what engine d->engine leaves for the cache of one GPU of `capacity_mib` holding `weights`
 * bytes, with `activation_peak` bytes profiled (vLLM) or the fraction `activations` kept (plain),
 * SGLang reserving for prefill graph g. KVL_EINVAL naming the engine when nothing is left. */
int kvl_engine_budget_of(kvl_engine_budget *out, const kvl_deployment *d, double capacity_mib, double weights,
                         double activation_peak, double activations, kvl_sglang_prefill_graph g);

/* Tokens of a pool of `budget` bytes at `bytes_per_token`: plain floor(budget / bytes); vLLM and
 * SGLang whole pages of d->page tokens. */
double kvl_engine_pool_tokens(const kvl_deployment *d, double budget, double bytes_per_token);

/* Bytes of weights one GPU of d holds as d->engine lays them out: the plain rule
 * (kvl_rank_weight_bytes), the fused q_a / kv_a projection of an MLA/DSA model and a DSA model's
 * indexers whole on every rank (vLLM, SGLang), SGLang's whole embedding or vLLM's tp-1 ranks under DP
 * attention, and the MTP module when d->draft_layers. */
double kvl_engine_weight_bytes(const kvl_params *p, const kvl_model *m, const kvl_deployment *d,
                               kvl_weight_format linear, kvl_weight_format experts, int scale_e8m0);

/* out = what a cache budget of `budget` bytes per GPU holds at context T. KVL_EINVAL, naming the
 * budget, when it is below one sequence's window rows. */
int kvl_fit_of(kvl_fit *out, const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d, double budget,
               size_t T);

#endif
