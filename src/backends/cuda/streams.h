// Auxiliary streams for independent branches (docs/decisions/0011-aux-streams.md): which stream
// each layer of a GpuModel runs on, the events that order layers across streams, and the
// activation arena planned so that layers that may run concurrently never share bytes. Pure
// functions over the layer list (no CUDA calls), so the logic is tested without a GPU; GpuModel
// (gpu_model.cc) applies the result at enqueue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cuda {

// Aux streams a build may use when GpuBuildOptions::max_aux_streams is kAutoAuxStreams: enough
// for the widest common fork (Inception's four branches: the caller's stream + 3); more streams
// mostly add workspace memory.
constexpr int kAutoAuxStreams = 3;
constexpr int kMaxAuxStreams = 16;  // the most a build may ask for (plans outside 0..16 are invalid)

// What the planners need of an engine value (GVal without the device details).
struct StreamValue {
  size_t bytes = 0;           // storage size
  int alias_of = -1;          // shares the storage of this value (views, split parts, concat slices)
  int64_t alias_offset = 0;   // bytes into alias_of's storage where this value starts
  bool in_arena = true;       // false: a weight (read-only, never a hazard, no arena bytes)
};

// What the planners need of a layer: the values it reads and writes (-1 = omitted / in place).
struct StreamLayer {
  std::vector<int> ins, outs;
};

// Where each layer runs. Stream 0 is the caller's stream; 1..aux_streams are the context's aux
// streams. At enqueue: an event is recorded on stream 0 first and every aux stream waits on it
// (the fork); before layer i its stream waits on the events in waits[i]; after layer i, if
// record[i] >= 0, that event is recorded on its stream; at the end every aux stream records a
// join event that stream 0 waits on (the join), so the caller sees ordinary stream order and a
// capture of the enqueue is a well-formed fork/join graph.
struct StreamPlan {
  int aux_streams = 0;                  // aux streams used (0: every layer on the caller's stream)
  int events = 0;                       // cross-stream events (ids 0..events-1), join events excluded
  std::vector<int> stream;              // per layer: 0 .. aux_streams
  std::vector<int> record;              // per layer: event id recorded after it, or -1
  std::vector<std::vector<int>> waits;  // per layer: event ids its stream waits on before it
  // Per layer, per stream: the latest layer of that stream ordered before it (itself on its own
  // stream), -1 = none. A vector clock: layer a precedes layer b iff clock[b][stream[a]] >= a.
  std::vector<std::vector<int>> clock;

  // Layer a completes before layer b starts (or a == b), whatever the streams' timing.
  bool ordered(int a, int b) const;
  // Neither is ordered before the other: the two may run at the same time.
  bool concurrent(int a, int b) const { return !ordered(a, b) && !ordered(b, a); }
};

// Assigns streams in layer order. Layer j must follow every earlier layer whose bytes conflict
// with its own (it reads what they write, or writes what they read or write; byte ranges within
// a shared storage, so producers writing disjoint slices of one Concat output stay independent).
// j joins the lowest-numbered stream whose last layer it already depends on (continuing a
// chain, or joining branches onto the caller's stream); a layer whose producers' streams have
// moved on (the second and later consumers of a fork) opens a new aux stream while fewer than
// `max_aux_streams` are open, else takes the aux stream idle longest. Cross-stream dependencies
// become events, skipping those the vector clocks show are already implied.
// max_aux_streams <= 0: every layer on stream 0, no events.
StreamPlan assign_streams(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers,
                          int max_aux_streams);

struct ArenaPlan {
  std::vector<int64_t> offset;  // per value: bytes into the arena of storage roots in it, else -1
  size_t bytes = 0;             // arena size
  size_t activation_sum = 0;    // sum of the placed values' sizes (what no reuse would need)
};

// First-fit offsets (largest value first, 256-byte aligned) from live ranges in layer order:
// values whose ranges overlap get disjoint bytes. Graph inputs are live from before the first
// layer (copied in on stream 0), outputs until after the last (copied out after the join).
// With concurrency a sequential live range is not enough, so every range that meets a parallel
// region (the layers between two concurrent layers, merged) is widened to the whole region.
// Why that suffices: if layer p touching v and layer q touching w may run concurrently, p and q
// lie in one region R; v's range holds p, so it widens to cover R, and so does w's; both then
// hold p and q, so they overlap and v and w get disjoint bytes. With one stream there are no
// regions and the plan is the sequential one.
ArenaPlan plan_arena(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers,
                     const std::vector<int>& input_vals, const std::vector<int>& output_vals, const StreamPlan& sp);

// "" when no two layers that may run concurrently touch overlapping arena bytes with at least
// one of them writing; else the first such pair, named by layer index and value ids.
std::string find_arena_conflict(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers,
                                const std::vector<int64_t>& offset, const StreamPlan& sp);

}  // namespace kiln::cuda
