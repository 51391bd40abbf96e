// Streams, events and graphs of the emulated device. Work runs when it is issued, in order,
// so a stream is a handle and a place to capture into: while a stream captures, launches,
// copies and fills issued to it become nodes of a graph, replayed by cudaGraphLaunch.
// Synchronising a capturing stream invalidates the capture, as on a GPU.
#include "engine.hpp"
#include "fork_safe_mutex.hpp"
#include "streams.hpp"

#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace arbiter::emu {

struct Stream {
  bool capturing = false, invalidated = false;
  int mode = 0;
  std::thread::id capturer;
  Graph* graph = nullptr;
};

struct Event {
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

struct Graph {
  std::vector<GraphNode> nodes;
};

namespace {

ForkSafeMutex streams_mutex{fork_rank::streams};
std::set<Stream*>& streams() {
  static auto* s = new std::set<Stream*>;
  return *s;
}

bool valid(Stream* s) {
  if (s == nullptr) return true;  // the legacy default stream
  std::lock_guard<ForkSafeMutex> lock(streams_mutex);
  return streams().count(s) != 0;
}

void invalidate(Stream* s) {
  if (s != nullptr && s->capturing) s->invalidated = true;
}

}  // namespace

GraphNode::~GraphNode() {
  if (arguments != nullptr && free_arguments != nullptr) free_arguments(arguments);
}

GraphNode::GraphNode(const GraphNode& o)
    : kind(o.kind), kernel(o.kernel), probe(o.probe), config(o.config), run(o.run), copy_arguments(o.copy_arguments),
      free_arguments(o.free_arguments), dst(o.dst), src(o.src), bytes(o.bytes), value(o.value), memcpy_kind(o.memcpy_kind),
      event(o.event) {
  if (o.arguments != nullptr) arguments = copy_arguments(o.arguments);
}

Status execute(const GraphNode& node, Stream* stream) {
  switch (node.kind) {
    case GraphNode::Kind::kernel: {
      LaunchConfig config = node.config;
      config.stream = stream;
      return launch(node.kernel, node.probe, config, node.run, node.arguments, node.copy_arguments, node.free_arguments);
    }
    case GraphNode::Kind::copy: return memcpy_async(node.dst, node.src, node.bytes, node.memcpy_kind, stream);
    case GraphNode::Kind::fill: return memset_async(node.dst, node.value, node.bytes, stream);
    case GraphNode::Kind::event: return event_record(node.event, stream);
  }
  return kErrorUnknown;
}

bool capture(Stream* stream, GraphNode node) {
  if (stream == nullptr || !stream->capturing) return false;
  if (stream->capturer != std::this_thread::get_id() && stream->mode == 1) {
    stream->invalidated = true;  // another thread's work on a thread-local capture
    return true;
  }
  stream->graph->nodes.push_back(std::move(node));
  return true;
}

Status stream_create(Stream** stream) {
  if (stream == nullptr) return set_error(kErrorInvalidValue);
  *stream = new Stream;
  std::lock_guard<ForkSafeMutex> lock(streams_mutex);
  streams().insert(*stream);
  return kSuccess;
}

Status stream_destroy(Stream* stream) {
  if (stream == nullptr) return kSuccess;
  {
    std::lock_guard<ForkSafeMutex> lock(streams_mutex);
    if (streams().erase(stream) == 0) return set_error(kErrorInvalidResourceHandle);
  }
  delete stream->graph;
  delete stream;
  return kSuccess;
}

Status stream_synchronize(Stream* stream) {
  if (!valid(stream)) return set_error(kErrorInvalidResourceHandle);
  if (stream != nullptr && stream->capturing) {
    invalidate(stream);
    return set_error(kErrorStreamCaptureUnsupported);
  }
  return kSuccess;  // the work is done already
}

Status device_synchronize() {
  std::lock_guard<ForkSafeMutex> lock(streams_mutex);
  for (Stream* s : streams())
    if (s->capturing && s->mode == 0) {  // a global-mode capture forbids it everywhere
      s->invalidated = true;
      return set_error(kErrorStreamCaptureUnsupported);
    }
  return kSuccess;
}

Status stream_begin_capture(Stream* stream, int mode) {
  if (stream == nullptr) return set_error(kErrorStreamCaptureUnsupported);  // the legacy stream cannot
  if (!valid(stream)) return set_error(kErrorInvalidResourceHandle);
  if (stream->capturing) return set_error(kErrorIllegalState);
  stream->capturing = true;
  stream->invalidated = false;
  stream->mode = mode;
  stream->capturer = std::this_thread::get_id();
  stream->graph = new Graph;
  return kSuccess;
}

Status stream_end_capture(Stream* stream, Graph** graph) {
  if (graph == nullptr) return set_error(kErrorInvalidValue);
  *graph = nullptr;
  if (stream == nullptr || !valid(stream) || !stream->capturing) return set_error(kErrorStreamCaptureUnmatched);
  Graph* g = stream->graph;
  stream->graph = nullptr;
  stream->capturing = false;
  if (stream->invalidated) {
    delete g;
    return set_error(kErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return kSuccess;
}

Status stream_is_capturing(Stream* stream, int* status) {
  if (status == nullptr || !valid(stream)) return set_error(kErrorInvalidValue);
  *status = stream == nullptr || !stream->capturing ? 0 : stream->invalidated ? 2 : 1;
  return kSuccess;
}

Status graph_instantiate(Graph** exec, Graph* graph) {
  if (exec == nullptr || graph == nullptr) return set_error(kErrorInvalidValue);
  *exec = new Graph(*graph);  // every node's arguments copied
  return kSuccess;
}

Status graph_launch(Graph* exec, Stream* stream) {
  if (exec == nullptr || !valid(stream)) return set_error(kErrorInvalidResourceHandle);
  if (stream != nullptr && stream->capturing) {
    for (const GraphNode& n : exec->nodes) capture(stream, n);
    return kSuccess;
  }
  for (const GraphNode& n : exec->nodes)
    if (const Status s = execute(n, stream); s != kSuccess) return s;
  return kSuccess;
}

Status graph_destroy(Graph* graph) {
  delete graph;
  return kSuccess;
}

size_t graph_node_count(Graph* graph) { return graph ? graph->nodes.size() : 0; }

Status event_create(Event** event) {
  if (event == nullptr) return set_error(kErrorInvalidValue);
  *event = new Event;
  return kSuccess;
}

Status event_destroy(Event* event) {
  delete event;
  return kSuccess;
}

Status event_record(Event* event, Stream* stream) {
  if (event == nullptr || !valid(stream)) return set_error(kErrorInvalidResourceHandle);
  GraphNode node;
  node.kind = GraphNode::Kind::event;
  node.event = event;
  if (capture(stream, std::move(node))) return kSuccess;
  event->recorded = true;
  event->time = std::chrono::steady_clock::now();
  return kSuccess;
}

Status event_synchronize(Event* event) { return event == nullptr ? set_error(kErrorInvalidResourceHandle) : kSuccess; }

Status event_elapsed_ms(float* ms, Event* start, Event* stop) {
  if (ms == nullptr || start == nullptr || stop == nullptr) return set_error(kErrorInvalidValue);
  if (!start->recorded || !stop->recorded) return set_error(kErrorInvalidResourceHandle);
  // Host time of the emulator: how long emulation took, never a GPU time.
  *ms = std::chrono::duration<float, std::milli>(stop->time - start->time).count();
  return kSuccess;
}

Status memcpy_async(void* dst, const void* src, size_t bytes, int kind, Stream* stream) {
  if (!valid(stream)) return set_error(kErrorInvalidResourceHandle);
  if (kind < 0 || kind > 4) return set_error(kErrorInvalidMemcpyDirection);
  if (bytes > 0 && (dst == nullptr || src == nullptr)) return set_error(kErrorInvalidValue);
  GraphNode node;
  node.kind = GraphNode::Kind::copy;
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  node.memcpy_kind = kind;
  if (capture(stream, std::move(node))) return kSuccess;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return kSuccess;
}

Status memset_async(void* dst, int value, size_t bytes, Stream* stream) {
  if (!valid(stream)) return set_error(kErrorInvalidResourceHandle);
  if (bytes > 0 && dst == nullptr) return set_error(kErrorInvalidValue);
  GraphNode node;
  node.kind = GraphNode::Kind::fill;
  node.dst = dst;
  node.value = value;
  node.bytes = bytes;
  if (capture(stream, std::move(node))) return kSuccess;
  if (bytes > 0) std::memset(dst, value, bytes);
  return kSuccess;
}

}  // namespace arbiter::emu
