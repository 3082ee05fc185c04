// Decode steps as CUDA graphs. A decode step issues ~20 launches a layer; recorded once as a graph,
// the next steps of the same shape (Backend::PassShape) replay it with one launch. The backend runs
// the pass's host side on every step (ids, positions, page tables and state pointers written into
// pinned memory, as always) but in replay it enqueues nothing: the graph's copy nodes read those
// pinned bytes when it runs. That holds only if a replayed step takes the same pinned and device
// buffers, in the same order and sizes, as its recording: every upload and every copy to the host
// is logged and compared before a replay is launched, and a mismatch fails the step (and turns
// graphs off) instead of running a graph on the wrong buffers.
//
// A shape is recorded the second time it is seen (a one-off shape is not worth a recording, and the
// first pass sets up what recording cannot: lazily built expert tables, the router's counter).
// FT_CUDA_GRAPHS=0 turns graphs off. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ft::engine::cuda {

class PassGraphs {
 public:
  enum class Mode { kRun, kRecord, kReplay };

  PassGraphs();
  ~PassGraphs();
  PassGraphs(const PassGraphs&) = delete;
  PassGraphs& operator=(const PassGraphs&) = delete;

  // What to do with a pass of this shape: run it as it is, record it, or replay its recording.
  Mode plan(const std::vector<int64_t>& key);
  void disable() { enabled_ = false; }
  // Drops every recording (they address memory that is about to move: a resized workspace).
  void clear();

  // The current pass's uploads (pinned source -> device) and copies to the host (device -> pinned,
  // then pinned -> dst once the pass is done), logged while recording or replaying.
  void begin_pass();
  void log_upload(const void* pinned, const void* dev, std::size_t bytes);
  void log_copy(void* dst, const void* pinned, std::size_t bytes);

  // Recording: capture the stream's work; then end the capture, instantiate it under `key` and launch
  // it. Replay: check the pass's logs against the recording of `key` and launch it. Each returns an
  // error text, empty on success.
  std::string begin_capture(cudaStream_t s);
  std::string finish_record(cudaStream_t s, const std::vector<int64_t>& key);
  std::string launch_replay(cudaStream_t s, const std::vector<int64_t>& key);
  // After the stream has synchronised: the pinned copies into their destinations.
  void copy_out() const;

 private:
  struct Upload {
    const void* pinned;
    const void* dev;
    std::size_t bytes;
    bool operator==(const Upload&) const = default;
  };
  struct Copy {
    void* dst;
    const void* pinned;
    std::size_t bytes;
  };
  struct Recording {
    cudaGraphExec_t exec = nullptr;
    std::vector<Upload> uploads;
    std::vector<Copy> copies;
  };
  // More shapes than this and the recordings start over (batch sizes x context buckets stay far
  // below it in practice).
  static constexpr std::size_t kMaxRecordings = 256;

  bool enabled_ = true;
  std::map<std::vector<int64_t>, Recording> recordings_;
  std::map<std::vector<int64_t>, int> seen_;
  std::vector<Upload> uploads_;
  std::vector<Copy> copies_;
};

}  // namespace ft::engine::cuda
