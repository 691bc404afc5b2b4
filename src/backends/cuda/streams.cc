// Stream assignment, events and the concurrency-aware arena plan (see streams.h).
#include "backends/cuda/streams.h"

#include <algorithm>
#include <climits>
#include <utility>

namespace kiln::cuda {

namespace {

// One byte range of a layer's access to a storage root (a value that aliases nothing).
struct Access {
  int root;
  int64_t begin, end;  // bytes into the root's storage, [begin, end)
  bool write;
};

// The storage root of value v and v's byte offset inside it.
std::pair<int, int64_t> resolve(const std::vector<StreamValue>& vals, int v) {
  int64_t off = 0;
  while (vals[static_cast<size_t>(v)].alias_of >= 0) {
    off += vals[static_cast<size_t>(v)].alias_offset;
    v = vals[static_cast<size_t>(v)].alias_of;
  }
  return {v, off};
}

// The arena accesses of one layer (weights left out: nothing writes them).
std::vector<Access> accesses(const std::vector<StreamValue>& vals, const StreamLayer& l) {
  std::vector<Access> r;
  auto add = [&](int v, bool write) {
    if (v < 0 || static_cast<size_t>(v) >= vals.size()) return;
    const auto [root, off] = resolve(vals, v);
    if (!vals[static_cast<size_t>(root)].in_arena) return;
    r.push_back({root, off, off + static_cast<int64_t>(vals[static_cast<size_t>(v)].bytes), write});
  };
  for (int v : l.ins) add(v, false);
  for (int v : l.outs) add(v, true);
  return r;
}

bool overlap(int64_t b0, int64_t e0, int64_t b1, int64_t e1) { return b0 < e1 && b1 < e0; }

// For every layer, the earlier layers it must follow (read-after-write, write-after-read,
// write-after-write on overlapping bytes of one storage root), in increasing order.
std::vector<std::vector<int>> dependencies(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers) {
  std::vector<std::vector<std::pair<int, Access>>> by_root(vals.size());  // (layer, access)
  std::vector<std::vector<int>> deps(layers.size());
  for (size_t j = 0; j < layers.size(); ++j) {
    const std::vector<Access> mine = accesses(vals, layers[j]);
    for (const Access& a : mine)
      for (const auto& [i, b] : by_root[static_cast<size_t>(a.root)])
        if ((a.write || b.write) && overlap(a.begin, a.end, b.begin, b.end)) deps[j].push_back(i);
    for (const Access& a : mine) by_root[static_cast<size_t>(a.root)].emplace_back(static_cast<int>(j), a);
    std::sort(deps[j].begin(), deps[j].end());
    deps[j].erase(std::unique(deps[j].begin(), deps[j].end()), deps[j].end());
  }
  return deps;
}

}  // namespace

bool StreamPlan::ordered(int a, int b) const {
  if (a == b) return true;
  if (a > b) return false;  // layers are enqueued in order: a later layer never precedes an earlier one
  return clock[static_cast<size_t>(b)][static_cast<size_t>(stream[static_cast<size_t>(a)])] >= a;
}

StreamPlan assign_streams(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers,
                          int max_aux_streams) {
  const int n = static_cast<int>(layers.size());
  const int cap = std::clamp(max_aux_streams, 0, kMaxAuxStreams);
  const std::vector<std::vector<int>> deps = dependencies(vals, layers);
  StreamPlan sp;
  sp.stream.assign(static_cast<size_t>(n), 0);
  sp.record.assign(static_cast<size_t>(n), -1);
  sp.waits.assign(static_cast<size_t>(n), {});
  sp.clock.assign(static_cast<size_t>(n), {});
  // Per open stream: its last layer (-1: none yet) and what it is known to follow (vector clock).
  std::vector<int> tail = {-1};
  std::vector<std::vector<int>> known = {{-1}};
  auto clock_of = [&](int layer, int s) {  // a layer's clock entry for stream s (streams opened later: -1)
    const auto& c = sp.clock[static_cast<size_t>(layer)];
    return static_cast<size_t>(s) < c.size() ? c[static_cast<size_t>(s)] : -1;
  };
  for (int j = 0; j < n; ++j) {
    const std::vector<int>& d = deps[static_cast<size_t>(j)];
    const int open = static_cast<int>(tail.size());
    // A stream whose last layer j already follows: running j there costs no concurrency.
    int s = -1;
    for (int t = 0; t < open && s < 0; ++t) {
      if (tail[static_cast<size_t>(t)] < 0) {
        if (t == 0) s = 0;  // nothing on the caller's stream yet
        continue;
      }
      for (int i : d)
        if (clock_of(i, t) >= tail[static_cast<size_t>(t)]) {
          s = t;
          break;
        }
    }
    if (s < 0) {  // a fork: every stream is busy with work j does not depend on
      if (cap == 0) {
        s = 0;
      } else if (open - 1 < cap) {
        s = open;
        tail.push_back(-1);
        known.emplace_back(static_cast<size_t>(open + 1), -1);
        sp.aux_streams = open;
      } else {
        s = 1;  // the aux stream idle longest
        for (int t = 2; t < open; ++t)
          if (tail[static_cast<size_t>(t)] < tail[static_cast<size_t>(s)]) s = t;
      }
    }
    // Waits, latest dependency first: its clock often implies the earlier ones.
    std::vector<int>& k = known[static_cast<size_t>(s)];
    k.resize(tail.size(), -1);
    for (auto it = d.rbegin(); it != d.rend(); ++it) {
      const int i = *it;
      const int si = sp.stream[static_cast<size_t>(i)];
      if (k[static_cast<size_t>(si)] >= i) continue;  // already ordered
      int& ev = sp.record[static_cast<size_t>(i)];
      if (ev < 0) ev = sp.events++;
      sp.waits[static_cast<size_t>(j)].push_back(ev);
      const auto& ci = sp.clock[static_cast<size_t>(i)];
      for (size_t t = 0; t < ci.size(); ++t) k[t] = std::max(k[t], ci[t]);
    }
    k[static_cast<size_t>(s)] = j;
    sp.stream[static_cast<size_t>(j)] = s;
    sp.clock[static_cast<size_t>(j)] = k;
    tail[static_cast<size_t>(s)] = j;
  }
  // Clocks of layers placed before later streams opened: pad to the full width.
  for (auto& c : sp.clock) c.resize(static_cast<size_t>(sp.aux_streams + 1), -1);
  return sp;
}

ArenaPlan plan_arena(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers,
                     const std::vector<int>& input_vals, const std::vector<int>& output_vals, const StreamPlan& sp) {
  const int nv = static_cast<int>(vals.size());
  const int nl = static_cast<int>(layers.size());
  auto root = [&](int v) { return resolve(vals, v).first; };
  std::vector<int> first(static_cast<size_t>(nv), INT_MAX), last(static_cast<size_t>(nv), -1);
  for (int v : input_vals) first[static_cast<size_t>(root(v))] = -1;
  for (int i = 0; i < nl; ++i) {
    for (int v : layers[static_cast<size_t>(i)].ins)
      if (v >= 0) last[static_cast<size_t>(root(v))] = std::max(last[static_cast<size_t>(root(v))], i);
    for (int v : layers[static_cast<size_t>(i)].outs) {
      if (v < 0) continue;
      first[static_cast<size_t>(root(v))] = std::min(first[static_cast<size_t>(root(v))], i);
      last[static_cast<size_t>(root(v))] = std::max(last[static_cast<size_t>(root(v))], i);
    }
  }
  for (int v : output_vals) last[static_cast<size_t>(root(v))] = nl;
  for (int v : input_vals) last[static_cast<size_t>(root(v))] = std::max(last[static_cast<size_t>(root(v))], 0);

  // Parallel regions: for layer j, the earliest layer it may run concurrently with is, on each
  // other stream t, the first layer of t after clock[j][t] (a stream's layers run in order, so
  // every later one of t is unordered with j too). [that layer, j] spans a concurrent pair; the
  // union of these spans, merged, are the regions.
  if (sp.aux_streams > 0 && static_cast<int>(sp.stream.size()) == nl) {
    std::vector<std::vector<int>> on(static_cast<size_t>(sp.aux_streams + 1));
    for (int i = 0; i < nl; ++i) on[static_cast<size_t>(sp.stream[static_cast<size_t>(i)])].push_back(i);
    std::vector<std::pair<int, int>> spans;
    for (int j = 0; j < nl; ++j) {
      int lo = j;
      for (int t = 0; t <= sp.aux_streams; ++t) {
        if (t == sp.stream[static_cast<size_t>(j)]) continue;
        const auto& l = on[static_cast<size_t>(t)];
        auto it = std::upper_bound(l.begin(), l.end(), sp.clock[static_cast<size_t>(j)][static_cast<size_t>(t)]);
        if (it != l.end() && *it < j) lo = std::min(lo, *it);
      }
      if (lo < j) spans.emplace_back(lo, j);
    }
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<int, int>> regions;
    for (const auto& s : spans) {
      if (!regions.empty() && s.first <= regions.back().second) regions.back().second = std::max(regions.back().second, s.second);
      else regions.push_back(s);
    }
    // Widen each live range by every region it meets (regions are disjoint and sorted).
    for (int v = 0; v < nv; ++v) {
      if (first[static_cast<size_t>(v)] == INT_MAX) continue;
      const int f = first[static_cast<size_t>(v)], l = last[static_cast<size_t>(v)];
      for (const auto& [a, b] : regions)
        if (a <= l && f <= b) {
          first[static_cast<size_t>(v)] = std::min(first[static_cast<size_t>(v)], a);
          last[static_cast<size_t>(v)] = std::max(last[static_cast<size_t>(v)], b);
        }
    }
  }

  struct Block {
    int64_t off;
    size_t size;
    int first, last;
  };
  std::vector<Block> placed;
  std::vector<int> order;
  for (int v = 0; v < nv; ++v)
    if (vals[static_cast<size_t>(v)].alias_of < 0 && vals[static_cast<size_t>(v)].in_arena &&
        first[static_cast<size_t>(v)] != INT_MAX)
      order.push_back(v);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return vals[static_cast<size_t>(a)].bytes > vals[static_cast<size_t>(b)].bytes; });
  ArenaPlan p;
  p.offset.assign(static_cast<size_t>(nv), -1);
  for (int v : order) {
    const size_t size = (vals[static_cast<size_t>(v)].bytes + 255) / 256 * 256;
    p.activation_sum += size;
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Block& b : placed)
      if (!(b.last < first[static_cast<size_t>(v)] || last[static_cast<size_t>(v)] < b.first))
        busy.emplace_back(b.off, b.off + static_cast<int64_t>(b.size));
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto& [s, e] : busy) {
      if (off + static_cast<int64_t>(size) <= s) break;
      off = std::max(off, e);
    }
    p.offset[static_cast<size_t>(v)] = off;
    placed.push_back({off, size, first[static_cast<size_t>(v)], last[static_cast<size_t>(v)]});
    p.bytes = std::max(p.bytes, static_cast<size_t>(off) + size);
  }
  return p;
}

std::string find_arena_conflict(const std::vector<StreamValue>& vals, const std::vector<StreamLayer>& layers,
                                const std::vector<int64_t>& offset, const StreamPlan& sp) {
  const int nl = static_cast<int>(layers.size());
  if (sp.aux_streams == 0) return "";  // one stream: nothing runs concurrently
  if (static_cast<int>(sp.stream.size()) != nl) return "the stream plan does not match the layer list";
  // Physical arena byte ranges per layer.
  struct Range {
    int value;
    int64_t begin, end;
    bool write;
  };
  std::vector<std::vector<Range>> ranges(static_cast<size_t>(nl));
  for (int i = 0; i < nl; ++i) {
    const StreamLayer& l = layers[static_cast<size_t>(i)];
    auto add = [&](int v, bool write) {
      if (v < 0 || static_cast<size_t>(v) >= vals.size()) return;
      const auto [root, off] = resolve(vals, v);
      if (!vals[static_cast<size_t>(root)].in_arena) return;
      const int64_t base = offset[static_cast<size_t>(root)];
      if (base < 0) return;
      ranges[static_cast<size_t>(i)].push_back(
          {v, base + off, base + off + static_cast<int64_t>(vals[static_cast<size_t>(v)].bytes), write});
    };
    for (int v : l.ins) add(v, false);
    for (int v : l.outs) add(v, true);
  }
  for (int j = 0; j < nl; ++j)
    for (int i = 0; i < j; ++i) {
      if (!sp.concurrent(i, j)) continue;
      for (const Range& a : ranges[static_cast<size_t>(i)])
        for (const Range& b : ranges[static_cast<size_t>(j)])
          if ((a.write || b.write) && overlap(a.begin, a.end, b.begin, b.end))
            return "layers " + std::to_string(i) + " (stream " + std::to_string(sp.stream[static_cast<size_t>(i)]) +
                   ") and " + std::to_string(j) + " (stream " + std::to_string(sp.stream[static_cast<size_t>(j)]) +
                   ") may run concurrently but touch overlapping arena bytes (values " + std::to_string(a.value) +
                   " and " + std::to_string(b.value) + ")";
    }
  return "";
}

}  // namespace kiln::cuda
