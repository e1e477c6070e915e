//===- Serving.h - Serving plans: prefill, decode, KV cache, SLO -*- C++
//-*-===//
//
// --mode serve: how a decoder serves requests of prompt length P and G
// generated tokens. Two ways an engine batches them:
//  - in-flight (continuous) batching, the default (vLLM, MindIE,
//    TensorRT-LLM's executor, LMDeploy's TurboMind): sequences join and
//    leave the batch between steps; each step decodes one token of every
//    sequence in flight and, in the same forward, prefills the prompts of
//    the requests that joined (Agrawal et al. 2024, Sarathi-Serve: mixed
//    batches, chunked to the engine's token budget per step);
//  - static batching (--set serve.batching=static; TensorRT-LLM's
//    gptSessionBenchmark): the batch's b prompts are prefilled together in
//    one forward, then decoded together for G - 1 steps.
// Both phases are costed from the evaluator's per-node costs
// (PlanEvaluator::getLayerForwardTime: the same roofline, cube efficiency
// and launch overhead as training and inference plans) and its per-layer
// facts (KV cache from the K and V tensors before any GQA repeat, TP
// all-reduces, pipeline transfers); nothing here models an op.
//
// Per replica of tp x pp devices, with b sequences in flight, mean context
// c (the prompt plus half the generated tokens) and m = ceil(b / pp)
// sequences per pipeline micro-batch:
//   stage step T_s(m)   = sum of its layers' forward at m decode tokens
//                         plus (in-flight) m P / G prompt tokens and their
//                         attention core (m / G prompts joining a step),
//                         in ceil(tokens / max_batched_tokens) forwards,
//                         each reading the weights
//                         + m * c * KV bytes per token of its layers / tp
//                         / HBM bandwidth (the decode attention core; x
//                         query heads / KV heads per layer where the
//                         engine's kernel reads the cache per query head,
//                         --set serve.decode_attention=per_query_head)
//                         + TP all-reduces
//   decode step         = max(sum_s T_s + transfers, pp * max_s T_s)
//   TPOT                = decode step
//   in-flight: TTFT     = prefill of one prompt through the stages + one
//                         decode step when others run (b > 1: a new
//                         request waits for the running step)
//              tokens/s = b / TPOT per replica, times the replicas (dp)
//   static:    TTFT     = prefill of the b prompts together (pp
//                         micro-batches of m prompts)
//              tokens/s = b G / (TTFT + (G - 1) decode step), times dp
//   max concurrency     = min over stages of (usable HBM - weights -
//                         workspace - comm buffers) / (KV bytes per
//                         sequence at P + G tokens)
// The decode attention core (scores and context against the cache) does
// ~2 FLOPs per cached element it reads, far below any accelerator's ridge
// point: it is costed as the cache read. With a length distribution, the
// means are weighted by the requests' weights (contexts and KV by their
// generated tokens, the time they stay in flight). The search tries every
// tp (dividing the heads, within the TP limit) and pp with tp * pp
// dividing the devices, dp = devices / (tp * pp), and for each the largest
// batch that fits the KV cache and meets the SLO (TPOT and TTFT grow with
// the batch); it maximises output tokens/s per device. Beside this pooled
// (colocated) layout it searches the disaggregated one, prefill and decode
// on separate pools with the KV cache sent between them
// (ServingDisagg.cpp states that model), under the same SLO.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLAN_SERVING_H
#define LOOM_PLAN_SERVING_H

#include "loom/Hardware/HardwareModel.h"
#include "loom/IR/Graph.h"
#include "loom/Planner/PlanCost.h"
#include "loom/Planner/Search.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace loom {

/// The request lengths a server sees: one (prompt, generated) pair
/// (--prompt-len, --gen-len) or a weighted mix (--lengths FILE).
struct ServingWorkload {
  struct Row {
    int64_t Prompt = 0, Gen = 0;
    double Weight = 1;
  };
  std::vector<Row> Rows;
  int64_t getMaxPrompt() const;
};

/// Reads a length-distribution file: one request class a line,
/// "prompt_len,gen_len,weight" (positive integers, a positive weight; the
/// weights need not sum to 1). Blank lines and lines starting with '#' are
/// skipped; a first line "prompt_len,gen_len,weight" is a header. Errors
/// name the file and line.
llvm::Expected<ServingWorkload> parseLengthFile(llvm::StringRef Path);

/// Latency targets (--slo ttft=500ms,tpot=50ms); either may be absent.
struct ServingSLO {
  llvm::Optional<double> TTFT, TPOT;
};
llvm::Expected<ServingSLO> parseSLO(llvm::StringRef Text);

/// The caps a serving engine puts on one replica's batch unless told
/// otherwise: sequences in flight, and tokens per scheduler step (each
/// decoding sequence takes one token of a step). Engines never fill HBM
/// with KV cache past them. 0: no cap.
struct ServingEngine {
  /// "vllm", "mindie", "trtllm" or "none".
  std::string Name = "none";
  unsigned MaxSeqs = 0, MaxTokens = 0;
  /// The engine's own names of the two caps (its flag or config key).
  std::string MaxSeqsKey, MaxTokensKey;
  /// Where the defaults come from.
  std::string Source;
  /// The cap on sequences in flight (0: none) and the key that sets it.
  std::pair<unsigned, std::string> getBatchCap() const;
};

/// The engines --engine names: vllm (the default), mindie, trtllm, none.
/// vLLM's defaults depend on the device (EngineArgs.get_batch_defaults):
/// the larger pair on devices of 70 GiB or more that are not A100s.
llvm::Expected<ServingEngine> getServingEngine(llvm::StringRef Name,
                                               const HardwareModel &HW);

/// How a serving plan places prefill and decode: both on every replica
/// (pooled, or colocated), or on two pools of devices with the KV cache
/// sent from one to the other (disaggregated: DistServe, Splitwise,
/// MindIE's PD separation).
enum class ServingLayout { Pooled, Disaggregated };

/// A serving plan fixed by --plan (or one --compare) under --mode serve:
/// any of tp, pp, dp (replicas) and batch (sequences in flight per
/// replica); the search fills the rest. layout=disagg fixes the
/// disaggregated layout, whose pools take prefill_tp, prefill_pp,
/// prefill_devices, decode_tp, decode_pp (and batch: per decode instance).
/// Without layout, a pin of tp, pp or dp or batch is a pooled plan.
struct ServingPin {
  llvm::Optional<unsigned> TP, PP, DP, Batch;
  llvm::Optional<ServingLayout> Layout;
  llvm::Optional<unsigned> PrefillTP, PrefillPP, PrefillDevices, DecodeTP,
      DecodePP;
  /// Whether any key fixes the pooled layout (tp, pp, dp, or layout=pooled).
  bool isPooled() const;
};
/// "tp=4,pp=1,batch=64", "layout=disagg,prefill_tp=2,decode_tp=4": errors
/// name the key and list the valid ones.
llvm::Expected<ServingPin> parseServingPlan(llvm::StringRef Text);

struct ServingOptions {
  ServingWorkload Load;
  ServingSLO SLO;
  ServingEngine Engine;
  /// --set serve.max_seqs / serve.max_batched_tokens: the engine's caps.
  llvm::Optional<unsigned> MaxSeqsSet, MaxTokensSet;
  /// --plan, and each --compare PLAN (as written, and parsed).
  llvm::Optional<ServingPin> Pin;
  std::vector<std::pair<std::string, ServingPin>> Compare;
  /// --fail: devices lost (Devices is what remains) and what they were.
  uint64_t FailedDevices = 0;
  std::string FailureWhat;
  /// Bytes per KV cache element (--set serve.kv_dtype=int8); 0: the
  /// element type of the graph's K and V.
  double KVElementBytes = 0;
  std::string KVDType;
  /// Devices to plan on; 0: the hardware's.
  uint64_t Devices = 0;
  /// --set serve.batching=static: the batch is prefilled together, then
  /// decoded together to its end (no request joins a running batch);
  /// default in-flight (continuous) batching.
  bool StaticBatching = false;
  /// The decode pool of a disaggregated layout: no prompt joins a decode
  /// step (its prefill ran on the other pool).
  bool DecodeOnly = false;
  /// --set serve.decode_attention=per_query_head: the engine's decode
  /// attention kernel runs one thread block per (sequence, query head), so
  /// under grouped-query attention each KV head's cache is read once per
  /// query head of its group (TensorRT-LLM's masked MHA kernel,
  /// decoderMaskedMultiheadAttentionTemplate.h: blockIdx.x is the query
  /// head, hi_kv = hi / qhead_per_kv; TurboMind's
  /// decoder_masked_multihead_attention_template.cuh, kvhi likewise).
  /// Default grouped: once per KV head (FlashDecoding's and FlashAttention's
  /// packed GQA, TensorRT-LLM's XQA), as the cache's size.
  bool DecodeKVPerQueryHead = false;
};

/// --set serve.kv_dtype=NAME: bytes per element of fp32, fp16, bf16, fp8,
/// int8; None for anything else.
llvm::Optional<double> getKVDTypeBytes(llvm::StringRef Name);

/// What binds a serving plan: its decode step (compute, HBM bandwidth,
/// communication) or the KV cache's room (memory).
/// Other kernels: the rest of the decode step, the activations' traffic
/// and launch overheads of many small kernels (eager mode).
enum class ServingTerm {
  Compute,
  HBMBandwidth,
  Communication,
  Memory,
  OtherKernels
};
llvm::StringRef getServingTermName(ServingTerm T);

/// What keeps the batch from growing: the KV cache's room, a latency
/// target, the engine's cap, or --plan's batch.
enum class BatchLimit { Memory, TTFT, TPOT, EngineCap, Given };
llvm::StringRef getBatchLimitName(BatchLimit L);

struct ServingPlanCost {
  unsigned TP = 1, PP = 1, DP = 1;
  /// Sequences in flight per replica, and the most the KV cache holds.
  unsigned Batch = 0, MaxConcurrency = 0;
  /// Prefill of one prompt through every stage (mean over the workload;
  /// with static batching, of the batch's prompts together), and of one
  /// prompt on the busiest stage.
  double PrefillS = 0, PrefillStageS = 0;
  /// One decode step of the batch (a token for every sequence; in flight,
  /// with the joining prompts' tokens in the same forward).
  double DecodeStepS = 0;
  double TTFTS = 0, TPOTS = 0;
  /// Output tokens/s of all replicas, and per device.
  double TokensPerS = 0, TokensPerSPerDevice = 0;
  /// The busiest stage's decode step, term by term: matmul FLOPs at the
  /// cube peak (2 per weight per token), the weights and the KV cache read
  /// at HBM bandwidth, TP all-reduces and the pipeline transfer.
  double ComputeS = 0, WeightReadS = 0, KVReadS = 0, CommS = 0;
  /// Those terms are per micro-batch of MicroBatch sequences (ceil(Batch /
  /// pp)) on the busiest stage, whose time is StageS (the rest of it:
  /// activations and kernel launches).
  unsigned MicroBatch = 0;
  double StageS = 0;
  /// Per device of the busiest stage: the KV cache at Batch sequences, the
  /// room for it, the weights.
  double KVCacheBytes = 0, KVCapacityBytes = 0, WeightBytes = 0;
  /// What binds the decode step (compute, HBM bandwidth, communication),
  /// and the plan (memory when the KV cache caps the batch).
  ServingTerm StepBound = ServingTerm::HBMBandwidth;
  ServingTerm Bound = ServingTerm::HBMBandwidth;
  BatchLimit Limit = BatchLimit::Memory;
  bool MeetsSLO = false;
  /// "tp=8,pp=1,dp=2,batch=96".
  std::string str() const;
};

/// The predicted serving numbers of \p P as JSON keys and values, the one
/// list both writers use: first the headline numbers (ttft_s, tpot_s,
/// output_tokens_per_s, max_concurrency, kv_cache_bytes), which the
/// manifest of -o carries; with \p Detail the rest too, which --format
/// json's predicted{} and top[] carry (getServingPredictedJSON).
void forEachServingPredicted(
    const ServingPlanCost &P, bool Detail,
    llvm::function_ref<void(llvm::StringRef Key, llvm::json::Value V)> Emit);

/// A disaggregated serving plan (ServingDisagg.cpp): a prefill pool of
/// Prefill.DP instances of Prefill.TP x Prefill.PP devices, each
/// prefilling PrefillBatch prompts a forward, and a decode pool of
/// Decode.DP instances of Decode.TP x Decode.PP, each decoding
/// Decode.Batch sequences; every request's KV cache crosses from the
/// first to the second over LinkName.
struct DisaggPlanCost {
  ServingPlanCost Prefill, Decode;
  unsigned PrefillDevices = 0, DecodeDevices = 0, PrefillBatch = 1;
  /// One prefill forward of PrefillBatch prompts.
  double PrefillForwardS = 0;
  /// Requests per second each pool sustains (all its instances).
  double PrefillRate = 0, DecodeRate = 0;
  /// The prefill pool's utilisation at the served rate, the wait for the
  /// running prefill forward it implies.
  double Utilisation = 0, QueueS = 0;
  /// One request's KV cache (the whole model's, at its mean prompt), what
  /// each sending device moves, its time, and the level it crosses.
  double KVTransferBytes = 0, KVTransferPerDevice = 0, KVTransferS = 0;
  std::string LinkName;
  double TTFTS = 0, TPOTS = 0, TokensPerS = 0, TokensPerSPerDevice = 0;
  bool MeetsSLO = false;
  /// Whether the prefill pool (not the decode pool) sets the throughput.
  bool PrefillBound = false;
  /// "layout=disagg,prefill_tp=1,prefill_devices=2,decode_tp=2,..."
  std::string str() const;
};

/// The disaggregated plan's numbers as JSON keys, as
/// forEachServingPredicted: the headline (the same five keys, then layout,
/// prefill_devices, prefill_tp, prefill_pp, decode_devices), with \p Detail
/// the rest (the pools' rates, the queue, the KV transfer).
void forEachDisaggPredicted(
    const DisaggPlanCost &D, bool Detail,
    llvm::function_ref<void(llvm::StringRef Key, llvm::json::Value V)> Emit);

struct ServingResult {
  ServingOptions Opts;
  /// The best of each (tp, pp): those meeting the SLO first, most output
  /// tokens/s per device first; then the rest at batch 1, least TPOT first.
  std::vector<ServingPlanCost> Plans;
  bool Feasible = false;
  /// The whole model's KV cache per token, at the KV element type.
  double KVBytesPerToken = 0;
  /// Means over the workload: prompt, generated tokens, decode context,
  /// tokens a sequence holds in the KV cache.
  double MeanPrompt = 0, MeanGen = 0, MeanContext = 0, MeanKVTokens = 0;
  uint64_t Devices = 0;
  /// The chosen plan at other batches (1, 2, 4, ... up to 8x its own, its
  /// own, and the most the KV cache holds): the trade-off between
  /// latency and throughput that report.txt tabulates and report.html
  /// plots.
  std::vector<ServingPlanCost> Sweep;
  /// With --plan and --compare: the best plan without --plan; each
  /// --compare plan as written and its cost.
  llvm::Optional<ServingPlanCost> Unconstrained;
  std::vector<std::pair<std::string, ServingPlanCost>> Compared;
  /// The best disaggregated plan (none on one device, with a pooled pin,
  /// or when no split of the devices holds the model), and whether it
  /// beats the pooled one (Plans.front()) and is the chosen plan.
  llvm::Optional<DisaggPlanCost> Disagg;
  bool DisaggChosen = false;
  /// With --fail: the best plan on the intact cluster.
  llvm::Optional<ServingPlanCost> BeforeFailure;
  /// Batches costed, for --time-passes.
  uint64_t Candidates = 0;
  double Seconds = 0;
};

/// Costs the serving plan tp x pp (dp replicas) at \p Batch sequences in
/// flight (0: the most that fit); errors when pp exceeds the layers or
/// the weights leave no room for one sequence's KV cache.
llvm::Expected<ServingPlanCost>
costServingPlan(const PlanEvaluator &Eval, llvm::ArrayRef<LayerInfo> Layers,
                const HardwareModel &HW, const EvaluatorOptions &EO,
                const ServingOptions &O, unsigned TP, unsigned PP, unsigned DP,
                unsigned Batch);

/// The disaggregated search over every split of \p Devices into a prefill
/// and a decode pool and every tp x pp of each (only \p O.Pin's, if it
/// fixes them); None when no split holds the model.
llvm::Expected<llvm::Optional<DisaggPlanCost>>
searchDisaggregated(const PlanEvaluator &Eval, llvm::ArrayRef<LayerInfo> Layers,
                    const HardwareModel &HW, const EvaluatorOptions &EO,
                    const SearchSpace &Space, const ServingOptions &O,
                    uint64_t Devices);

/// Whether \p D is the better plan than the pooled \p P: meeting the SLO
/// first, then output tokens/s per device (the pooled plan on a tie).
bool isDisaggBetter(const DisaggPlanCost &D, const ServingPlanCost &P);

/// The search. No plan meeting the SLO is not an error here: Feasible is
/// false (describeNoServingPlan says why). Errors: a model without a KV
/// cache (no attention) or without a sequence dim.
llvm::Expected<ServingResult>
searchServing(const PlanEvaluator &Eval, llvm::ArrayRef<LayerInfo> Layers,
              const HardwareModel &HW, const EvaluatorOptions &EO,
              const SearchSpace &Space, const ServingOptions &O);

} // namespace loom

#endif // LOOM_PLAN_SERVING_H
