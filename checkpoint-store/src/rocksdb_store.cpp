// RocksDbStore: how a checkpoint is laid out in RocksDB, and why it survives crashes.
//
// Save protocol. A small checkpoint is one WriteBatch: every blob piece, the header (meta) and its
// last-use record; RocksDB applies a batch atomically, WAL included. A checkpoint larger than
// write_batch_bytes is several batches, so the first one also writes a pending marker
// ("p" + key, default CF) and the last one, which writes the header, deletes it. After a crash,
// open() removes the blobs of every key still marked pending. Hence: a header implies all its
// pieces, and no piece outlives a save that did not finish. Replacing a key first deletes the old
// header and pieces (in that first batch), so old and new pieces never mix.
//
// KV pages are stored once. The checkpoints of one growing sequence share their first pages (the
// engine hands the same page to each), so a page is stored under its content, not its checkpoint:
// "pages" CF, tenant | model | XXH3-128 | bytes | piece size, then the piece. Which checkpoints hold
// a page is known in memory only (rebuilt from the headers at open): a save writes the pages no
// checkpoint holds yet, before its header; the deletion of a checkpoint deletes, in the same batch
// as its header, the pages no other checkpoint holds. So a header still implies all its pages. Each
// page stored is also listed ("g" + name, default CF, written with its first piece, deleted with
// its pieces), so that open() finds the pages no header names (a save that did not finish, a
// header dropped as damaged) without reading the pages themselves, and deletes them. The byte
// budget counts each page once.
//
// Reads take a RocksDB snapshot, so a reader sees one complete checkpoint even while a save or a
// drop runs. Any checksum, version, size or missing-piece fault makes the entry a miss: it is
// logged, counted and deleted.
#include "ft/store/rocksdb_store.h"

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/write_batch.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <mutex>

#include "eviction_policy.h"
#include "ft/common/log.h"
#include "ft/common/private_dir.h"
#include "ft/store/store_key.h"
#include "write_behind.h"

namespace ft::store {
namespace {

constexpr char kMetaCf[] = "meta";
constexpr char kBlobsCf[] = "blobs";
constexpr char kPagesCf[] = "pages";
constexpr char kPendingTag = 'p';  // default CF: save in progress
constexpr char kUseTag = 'u';      // default CF: last use, i64 ms LE
constexpr char kPageTag = 'g';     // default CF: a KV page stored (its name)

std::string tagged(char tag, std::string_view key) { return std::string(1, tag) + std::string(key); }

std::string encode_i64(std::int64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
  return out;
}

std::int64_t decode_i64(std::string_view in) {
  if (in.size() != 8) return 0;
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return static_cast<std::int64_t>(v);
}

std::string describe(std::string_view encoded_key) {
  auto key = decode_store_key(encoded_key);
  if (!key.is_ok()) return "<undecodable key>";
  return key->tenant + "/" + key->model.to_hex() + "/" + key->prefix.to_hex();
}

rocksdb::CompressionType to_rocksdb(Compression c) {
  switch (c) {
    case Compression::kNone: return rocksdb::kNoCompression;
    case Compression::kLz4: return rocksdb::kLZ4Compression;
    case Compression::kZstd: return rocksdb::kZSTD;
  }
  return rocksdb::kNoCompression;
}

bool supported(rocksdb::CompressionType type) {
  const auto all = rocksdb::GetSupportedCompressions();
  return type == rocksdb::kNoCompression || std::find(all.begin(), all.end(), type) != all.end();
}

struct XxhStateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

bool matches(XXH128_hash_t h, const ChunkHash& expected) { return h.low64 == expected.lo && h.high64 == expected.hi; }

std::string tenant_of(std::string_view encoded_key) {
  return std::string(encoded_key.substr(1, static_cast<unsigned char>(encoded_key[0])));
}

}  // namespace

struct RocksDbStore::Impl {
  StoreOptions opt;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // default, meta, blobs, pages
  rocksdb::ColumnFamilyHandle* cf_default = nullptr;
  rocksdb::ColumnFamilyHandle* cf_meta = nullptr;
  rocksdb::ColumnFamilyHandle* cf_blobs = nullptr;
  rocksdb::ColumnFamilyHandle* cf_pages = nullptr;

  std::mutex write_mu;  // serializes saves, drops and evictions (a save may span batches)
  mutable std::mutex index_mu;
  EvictionIndex index;  // bytes there are logical: a checkpoint's whole size

  // Under write_mu: the KV pages stored and how many checkpoints hold each (a save in progress
  // holds its pages from before it writes them until it ends); what each checkpoint holds.
  struct PageExtent {
    std::uint64_t bytes = 0;
    std::uint32_t pieces = 0;
  };
  struct Page {
    std::uint32_t holders = 0;
    PageExtent extent;
  };
  std::map<std::string, Page> pages;
  struct PageRef {
    std::string name;
    PageExtent extent;
  };
  struct Held {
    std::vector<PageRef> pages;   // each once
    std::uint64_t own_bytes = 0;  // header and every chunk that is not a page
  };
  std::map<std::string, Held> held;  // by checkpoint key
  // Under index_mu: the bytes counted against the budget (each page once), in all and by tenant.
  std::uint64_t stored_bytes = 0;
  std::map<std::string, std::uint64_t> tenant_bytes;

  std::atomic<bool> degraded{false};
  std::atomic<std::uint64_t> hits{0}, misses{0}, evictions{0}, corruptions{0};
  std::unique_ptr<WriteBehind> writer;

  explicit Impl(StoreOptions o) : opt(std::move(o)), index(opt.eviction_ms_per_token) {}

  ~Impl() {
    writer.reset();  // writes what is queued; must finish before the DB closes
    persist_last_use();
    // Memtables into SST and blob files: RocksDB does not flush them at close while the WAL is
    // on, and replaying a large WAL makes the next open slow.
    if (db && !degraded.load()) {
      rocksdb::FlushOptions fo;
      fo.wait = true;
      if (const rocksdb::Status s = db->Flush(fo, handles); !s.ok())
        FT_WARN("checkpoint store: flush at close failed: " << s.ToString());
    }
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    if (db) db->Close();
  }

  std::int64_t now_ms() const {
    if (opt.clock_ms) return opt.clock_ms();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // Writes a batch; on failure switches to degraded (no persistence) instead of failing callers.
  bool write(rocksdb::WriteBatch& batch) {
    if (degraded.load()) return false;
    rocksdb::WriteOptions wo;
    wo.sync = opt.sync_writes;
    const rocksdb::Status s = db->Write(wo, &batch);
    if (s.ok()) return true;
    if (!degraded.exchange(true)) {
      FT_WARN("checkpoint store: write failed (" << s.ToString()
                                                << "); continuing without persistence (degraded)");
    }
    return false;
  }

  void delete_entry_ops(rocksdb::WriteBatch& b, const std::string& k) {
    b.Delete(cf_meta, k);
    b.DeleteRange(cf_blobs, k, prefix_end(k));
    b.Delete(cf_default, tagged(kUseTag, k));
  }

  void delete_page_ops(rocksdb::WriteBatch& b, const std::string& name, std::uint32_t pieces) {
    for (std::uint32_t piece = 0; piece < pieces; ++piece) b.Delete(cf_pages, page_piece_key(name, piece));
    b.Delete(cf_default, tagged(kPageTag, name));
  }

  void account(const std::string& k, std::int64_t delta) {
    std::lock_guard il(index_mu);
    stored_bytes += delta;
    std::uint64_t& t = tenant_bytes[tenant_of(k)];
    t += delta;
    if (t == 0) tenant_bytes.erase(tenant_of(k));
  }

  // What checkpoint `k` with this header holds: its pages (each once) and its own bytes.
  static Held holding(const std::string& k, const ModelStateHeader& h, std::size_t meta_bytes) {
    Held out;
    out.own_bytes = meta_bytes;
    for (std::size_t i = 0; i < h.chunks.size(); ++i) {
      const ChunkDesc& c = h.chunks[i];
      if (c.kind != ChunkKind::kKvPage) {
        out.own_bytes += c.bytes;
        continue;
      }
      std::string name = page_name(k, c, h.piece_bytes);
      const bool seen =
          std::any_of(out.pages.begin(), out.pages.end(), [&](const PageRef& r) { return r.name == name; });
      if (!seen) out.pages.push_back({std::move(name), {c.bytes, h.piece_count(i)}});
    }
    return out;
  }

  // Takes `h`'s hold on its pages; returns the bytes of those no checkpoint held before, whose
  // names go to `fresh` (the ones to write). Caller holds write_mu.
  std::uint64_t hold(const Held& h, std::vector<std::string>* fresh) {
    std::uint64_t added = 0;
    for (const PageRef& r : h.pages) {
      Page& p = pages[r.name];
      if (p.holders++ > 0) continue;
      p.extent = r.extent;
      added += r.extent.bytes;
      if (fresh) fresh->push_back(r.name);
    }
    return added;
  }

  // Lets go of `h`'s pages: those no one else holds are deleted in `b`. Returns their bytes.
  std::uint64_t release(const Held& h, rocksdb::WriteBatch& b) {
    std::uint64_t freed = 0;
    for (const PageRef& r : h.pages) {
      auto it = pages.find(r.name);
      if (it == pages.end() || --it->second.holders > 0) continue;
      delete_page_ops(b, r.name, it->second.extent.pieces);
      freed += it->second.extent.bytes;
      pages.erase(it);
    }
    return freed;
  }

  // Adds checkpoint k's deletion to `b` (header, own pieces, last use, the pages only it holds) and
  // takes it out of the accounting at once: the caller writes `b` next (were that to fail, the
  // store degrades and persists nothing more). Caller holds write_mu.
  void forget(rocksdb::WriteBatch& b, const std::string& k) {
    delete_entry_ops(b, k);
    auto it = held.find(k);
    if (it == held.end()) return;
    const std::uint64_t freed = it->second.own_bytes + release(it->second, b);
    held.erase(it);
    account(k, -static_cast<std::int64_t>(freed));
  }

  // Removes a bad entry, unless a save replaced it since `seen_meta` was read.
  void drop_bad(const std::string& k, const std::string& seen_meta, const std::string& reason) {
    FT_WARN("checkpoint store: dropping checkpoint " << describe(k) << ": " << reason);
    corruptions.fetch_add(1);
    std::lock_guard wl(write_mu);
    std::string current;
    const rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf_meta, k, &current);
    if (s.ok() && current != seen_meta) return;
    rocksdb::WriteBatch b;
    forget(b, k);
    write(b);
    std::lock_guard il(index_mu);
    index.erase(k);
  }

  void persist_last_use() {
    std::vector<std::pair<std::string, std::int64_t>> dirty;
    {
      std::lock_guard il(index_mu);
      dirty = index.take_dirty_last_use();
    }
    if (dirty.empty()) return;
    rocksdb::WriteBatch b;
    for (const auto& [k, ms] : dirty) b.Put(cf_default, tagged(kUseTag, k), encode_i64(ms));
    write(b);
  }

  std::uint64_t stored() const {
    std::lock_guard il(index_mu);
    return stored_bytes;
  }

  // Evicts, cheapest to lose first, until `incoming` more bytes fit the budget (or only pinned
  // checkpoints are left). Caller holds write_mu.
  void make_room(std::uint64_t incoming) {
    if (stored() + incoming <= opt.byte_budget) return;
    std::vector<std::string> victims;
    {
      std::lock_guard il(index_mu);
      index.cheapest_first([&](const std::string& k) {
        victims.push_back(k);
        return true;
      });
    }
    rocksdb::WriteBatch b;
    std::size_t evicted = 0;
    while (evicted < victims.size() && stored() + incoming > opt.byte_budget) forget(b, victims[evicted++]);
    if (evicted == 0 || !write(b)) return;
    std::lock_guard il(index_mu);
    for (std::size_t i = 0; i < evicted; ++i) index.erase(victims[i]);
    evictions.fetch_add(evicted);
  }

  Status save(const StoreKey& key, const ModelState& state) {
    FT_RETURN_IF_ERROR(validate_store_key(key));
    FT_RETURN_IF_ERROR(validate_state(state));
    if (state.model != key.model) return invalid_argument("state model fingerprint differs from the key's");
    if (degraded.load()) return Status::ok();

    const ModelStateHeader header = make_header(state, opt.piece_bytes);
    const std::string meta = encode_header(header);
    const std::string k = encode_store_key(key);
    const std::uint64_t bytes = meta.size() + header.payload_bytes();
    Held mine = holding(k, header, meta.size());

    std::lock_guard wl(write_mu);
    bool replacing = false;
    {
      std::lock_guard il(index_mu);
      replacing = index.erase(k);
    }
    // What the store grows by: this checkpoint's own bytes and the pages no checkpoint holds yet.
    std::uint64_t incoming = mine.own_bytes;
    for (const PageRef& r : mine.pages)
      if (!pages.count(r.name)) incoming += r.extent.bytes;
    if (incoming > opt.byte_budget) {
      FT_WARN("checkpoint store: checkpoint " << describe(k) << " of " << incoming
                                              << " new bytes exceeds the byte budget; not stored");
      if (replacing) {
        rocksdb::WriteBatch b;
        forget(b, k);
        write(b);
      }
      return Status::ok();
    }
    // Its pages are held from now on, so that neither the replaced state nor an eviction deletes
    // one of them.
    std::vector<std::string> fresh;
    const std::uint64_t added = hold(mine, &fresh);
    account(k, static_cast<std::int64_t>(mine.own_bytes + added));
    rocksdb::WriteBatch batch;
    if (replacing) forget(batch, k);
    make_room(0);

    bool marked = false;
    auto put = [&](rocksdb::ColumnFamilyHandle* cf, const std::string& piece_key, const std::byte* data,
                   std::size_t len) {
      batch.Put(cf, piece_key, rocksdb::Slice(reinterpret_cast<const char*>(data), len));
      if (batch.GetDataSize() < opt.write_batch_bytes) return true;
      if (!marked) batch.Put(cf_default, tagged(kPendingTag, k), "");
      marked = true;
      if (!write(batch)) return false;  // the marker makes the next open clean up
      batch.Clear();
      return true;
    };
    for (std::size_t i = 0; i < state.chunks.size(); ++i) {
      const auto& data = state.chunks[i].data;
      const bool page = state.chunks[i].kind == ChunkKind::kKvPage;
      std::string name;
      if (page) {
        name = page_name(k, header.chunks[i], header.piece_bytes);
        auto it = std::find(fresh.begin(), fresh.end(), name);
        if (it == fresh.end()) continue;  // stored already (by another checkpoint, or earlier in this one)
        fresh.erase(it);
      }
      if (page) batch.Put(cf_default, tagged(kPageTag, name), "");  // with its first piece
      for (std::uint32_t p = 0; p < header.piece_count(i); ++p) {
        const std::size_t off = std::size_t{p} * opt.piece_bytes;
        const std::size_t len = std::min<std::size_t>(opt.piece_bytes, data.size() - off);
        const bool ok = page ? put(cf_pages, page_piece_key(name, p), data.data() + off, len)
                             : put(cf_blobs, blob_key(k, static_cast<std::uint32_t>(i), p), data.data() + off, len);
        if (!ok) return Status::ok();
      }
    }
    const std::int64_t now = now_ms();
    batch.Put(cf_meta, k, meta);
    batch.Put(cf_default, tagged(kUseTag, k), encode_i64(now));
    if (marked) batch.Delete(cf_default, tagged(kPendingTag, k));
    if (!write(batch)) return Status::ok();
    held[k] = std::move(mine);
    {
      std::lock_guard il(index_mu);
      index.put(k, bytes, header.tokens, now);
    }
    persist_last_use();  // piggybacks lazily persisted last-use times on the save rate
    return Status::ok();
  }

  // Reads and checks one checkpoint inside a snapshot. A fault of the stored data drops the entry,
  // sets *dropped and returns kNotFound. Otherwise kNotFound means absent, or (when `expected` is
  // given) replaced by a different state; any other error is the sink's own.
  Status read(const std::string& k, const ModelStateHeader* expected, const ChunkSink& sink,
              std::uint64_t* bytes_read, bool* dropped) {
    rocksdb::ManagedSnapshot snap(db.get());
    rocksdb::ReadOptions ro;
    ro.snapshot = snap.snapshot();
    std::string meta;
    auto fail = [&](const std::string& why) {
      drop_bad(k, meta, why);
      *dropped = true;
      return not_found("checkpoint " + describe(k) + " was bad and is dropped: " + why);
    };
    rocksdb::Status s = db->Get(ro, cf_meta, k, &meta);
    if (s.IsNotFound()) return not_found("checkpoint " + describe(k) + " is gone");
    if (!s.ok()) return fail("reading header: " + s.ToString());
    auto header = decode_header(meta);
    if (!header.is_ok()) return fail(header.status().to_string());
    if (expected && !same_state(*header, *expected)) {
      return not_found("checkpoint " + describe(k) + " was replaced since it was looked up");
    }
    // Pieces are covered by the chunk's XXH3, so RocksDB's own per-block CRC32c (a software loop in
    // Debian's build, ~half the CPU of a restore) is skipped for them, and multi-MiB values stay out
    // of the block cache. The next kReadAhead pieces are read while this one is hashed and handed
    // to the sink: a cold restore costs about max(disk, CPU) instead of their sum, and the disk
    // sees several requests in flight rather than one 4 MiB read at a time.
    rocksdb::ReadOptions blob_ro = ro;
    blob_ro.verify_checksums = false;
    blob_ro.fill_cache = false;
    struct Piece {
      std::size_t chunk = 0;
      std::uint32_t index = 0;
    };
    std::vector<Piece> order;
    for (std::size_t i = 0; i < header->chunks.size(); ++i)
      for (std::uint32_t p = 0; p < header->piece_count(i); ++p) order.push_back({i, p});
    auto fetch = [&](std::size_t n) {
      auto value = std::make_unique<rocksdb::PinnableSlice>();
      const ChunkDesc& c = header->chunks[order[n].chunk];
      const rocksdb::Status st =
          c.kind == ChunkKind::kKvPage
              ? db->Get(blob_ro, cf_pages, page_piece_key(page_name(k, c, header->piece_bytes), order[n].index),
                        value.get())
              : db->Get(blob_ro, cf_blobs, blob_key(k, static_cast<std::uint32_t>(order[n].chunk), order[n].index),
                        value.get());
      return std::make_pair(st, std::move(value));
    };
    constexpr std::size_t kReadAhead = 4;
    std::deque<std::future<std::pair<rocksdb::Status, std::unique_ptr<rocksdb::PinnableSlice>>>> ahead;
    std::size_t issued = 0;
    auto top_up = [&] {
      while (issued < order.size() && ahead.size() < kReadAhead) ahead.push_back(std::async(std::launch::async, fetch, issued++));
    };
    // Whatever happens below, the reads in flight finish before `ro`'s snapshot goes away.
    struct Join {
      decltype(ahead)& fs;
      ~Join() {
        for (auto& f : fs)
          if (f.valid()) f.wait();
      }
    } join{ahead};
    top_up();

    std::unique_ptr<XXH3_state_t, XxhStateDeleter> hash(XXH3_createState());
    for (std::size_t n = 0; n < order.size(); ++n) {
      auto [st, value] = ahead.front().get();
      ahead.pop_front();
      top_up();
      const std::size_t i = order[n].chunk;
      const std::uint32_t p = order[n].index;
      const ChunkDesc& chunk = header->chunks[i];
      if (p == 0) XXH3_128bits_reset(hash.get());
      const std::uint64_t off = std::uint64_t{p} * header->piece_bytes;
      const std::uint64_t len = std::min<std::uint64_t>(header->piece_bytes, chunk.bytes - off);
      const std::string where = "chunk " + std::to_string(i) + " piece " + std::to_string(p);
      if (st.IsNotFound()) return fail(where + " missing");
      if (!st.ok()) return fail(where + ": " + st.ToString());
      if (value->size() != len) {
        return fail(where + " has " + std::to_string(value->size()) + " bytes, expected " + std::to_string(len));
      }
      XXH3_128bits_update(hash.get(), value->data(), value->size());
      if (bytes_read) *bytes_read += value->size();
      if (sink) {
        FT_RETURN_IF_ERROR(sink({i, off, {reinterpret_cast<const std::byte*>(value->data()), value->size()}}));
      }
      if (p + 1 == header->piece_count(i) && !matches(XXH3_128bits_digest(hash.get()), chunk.checksum)) {
        return fail("chunk " + std::to_string(i) + " (layer " + std::to_string(chunk.layer) + ") checksum mismatch");
      }
    }
    // Chunks stored as zero pieces (empty) still have a checksum to match.
    for (std::size_t i = 0; i < header->chunks.size(); ++i) {
      if (header->piece_count(i) == 0 && !matches(XXH3_128bits(nullptr, 0), header->chunks[i].checksum))
        return fail("chunk " + std::to_string(i) + " checksum mismatch");
    }
    return Status::ok();
  }

  Status drop_prefix(const std::string& prefix) {
    if (writer) writer->flush();  // a queued save must not resurrect what is dropped
    std::lock_guard wl(write_mu);
    rocksdb::WriteBatch b;
    b.DeleteRange(cf_meta, prefix, prefix_end(prefix));
    b.DeleteRange(cf_blobs, prefix, prefix_end(prefix));
    b.DeleteRange(cf_pages, prefix, prefix_end(prefix));  // pages are named by tenant and model too
    b.DeleteRange(cf_default, tagged(kPageTag, prefix), prefix_end(tagged(kPageTag, prefix)));
    b.DeleteRange(cf_default, tagged(kUseTag, prefix), prefix_end(tagged(kUseTag, prefix)));
    if (!write(b)) return io_error("checkpoint store is degraded; drop not persisted");
    for (auto it = pages.lower_bound(prefix); it != pages.end() && it->first.starts_with(prefix);) {
      account(it->first, -static_cast<std::int64_t>(it->second.extent.bytes));
      it = pages.erase(it);
    }
    for (auto it = held.lower_bound(prefix); it != held.end() && it->first.starts_with(prefix);) {
      account(it->first, -static_cast<std::int64_t>(it->second.own_bytes));
      it = held.erase(it);
    }
    std::lock_guard il(index_mu);
    for (const auto& k : index.keys_with_prefix(prefix)) index.erase(k);
    return Status::ok();
  }

  // Crash recovery and index load; see the file comment.
  Status recover() {
    std::lock_guard wl(write_mu);
    std::vector<std::string> pending, stored_pages;
    std::map<std::string, std::int64_t> last_use;
    {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf_default));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string_view key(it->key().data(), it->key().size());
        if (key.empty()) continue;
        if (key[0] == kPendingTag) pending.emplace_back(key.substr(1));
        if (key[0] == kUseTag) last_use[std::string(key.substr(1))] = decode_i64(it->value().ToStringView());
        if (key[0] == kPageTag) stored_pages.emplace_back(key.substr(1));
      }
      if (!it->status().ok()) return io_error("checkpoint store: scanning bookkeeping: " + it->status().ToString());
    }
    if (!pending.empty()) {
      FT_WARN("checkpoint store: removing " << pending.size() << " checkpoint(s) whose save did not finish");
      rocksdb::WriteBatch b;
      for (const auto& k : pending) {
        delete_entry_ops(b, k);
        b.Delete(cf_default, tagged(kPendingTag, k));
      }
      write(b);
    }
    std::vector<std::pair<std::string, std::string>> bad;  // key, reason
    std::size_t other_format = 0;                          // of them, of a format this build does not read
    {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf_meta));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string k = it->key().ToString();
        auto key = decode_store_key(k);
        auto header = decode_header(it->value().ToStringView());
        if (!key.is_ok() || !header.is_ok()) {
          bad.emplace_back(k, !key.is_ok() ? key.status().to_string() : header.status().to_string());
          other_format += key.is_ok() && header.status().code() == ErrorCode::kUnsupported;
          continue;
        }
        if (header->model != key->model) {
          bad.emplace_back(k, "header model differs from the key's");
          continue;
        }
        auto lu = last_use.find(k);
        index.put(k, it->value().size() + header->payload_bytes(), header->tokens,
                  lu == last_use.end() ? 0 : lu->second);
        Held h = holding(k, *header, it->value().size());
        account(k, static_cast<std::int64_t>(h.own_bytes + hold(h, nullptr)));
        held[k] = std::move(h);
      }
      if (!it->status().ok()) return io_error("checkpoint store: scanning headers: " + it->status().ToString());
    }
    if (!bad.empty()) {
      // Checkpoints of another format (an upgrade changed it) are misses for this build, not
      // damage: one line says so, and they are not counted as corrupt.
      if (other_format > 0)
        FT_WARN("checkpoint store: removing " << other_format
                                              << " checkpoint(s) of another format version (this build reads version "
                                              << kCheckpointFormatVersion << ")");
      rocksdb::WriteBatch b;
      for (const auto& [k, reason] : bad) {
        if (reason.find("checkpoint format version") == std::string::npos)
          FT_WARN("checkpoint store: dropping checkpoint " << describe(k) << ": " << reason);
        delete_entry_ops(b, k);
      }
      corruptions.fetch_add(bad.size() - other_format);
      write(b);
    }
    delete_orphan_pages(stored_pages);
    make_room(0);  // the budget may have shrunk since the last run
    return Status::ok();
  }

  // Pages stored that no checkpoint names (a save that did not finish, a header dropped as
  // damaged) are deleted. Caller holds write_mu; `pages` holds every page the headers name.
  void delete_orphan_pages(const std::vector<std::string>& stored_pages) {
    rocksdb::WriteBatch b;
    std::size_t orphans = 0;
    for (const std::string& name : stored_pages) {
      if (pages.count(name)) continue;
      delete_page_ops(b, name, page_pieces(name));
      ++orphans;
    }
    if (orphans == 0) return;
    FT_WARN("checkpoint store: removing " << orphans << " KV page(s) no checkpoint holds (a save that did not finish)");
    write(b);
  }
};

Result<std::unique_ptr<RocksDbStore>> RocksDbStore::open(StoreOptions options) {
  if (options.path.empty()) return invalid_argument("checkpoint store: options.path is empty");
  if (options.piece_bytes == 0) return invalid_argument("checkpoint store: piece_bytes is 0");
  const rocksdb::CompressionType payload_compression = to_rocksdb(options.compression);
  if (!supported(payload_compression)) {
    return unsupported("checkpoint store: this RocksDB build lacks the requested compression");
  }

  rocksdb::DBOptions db_opt;
  db_opt.create_if_missing = true;
  db_opt.create_missing_column_families = true;
  db_opt.max_background_jobs = 2;  // a cache must not steal the cores that feed the GPU
  // Recovered WAL data stays in the memtable (flushed later as usual) instead of being written to
  // SSTs during open: restarting after a crash is on the path to serving again.
  db_opt.avoid_flush_during_recovery = true;

  rocksdb::ColumnFamilyOptions meta_opt;
  meta_opt.compression = supported(rocksdb::kLZ4Compression) ? rocksdb::kLZ4Compression : rocksdb::kNoCompression;
  rocksdb::ColumnFamilyOptions blob_opt;
  // Integrated BlobDB: multi-MiB pieces go to blob files and are not rewritten at every compaction
  // level (plain LSM storage would write each piece ~10x); small conv states stay inline.
  blob_opt.enable_blob_files = true;
  blob_opt.min_blob_size = 4096;
  blob_opt.blob_file_size = 256ull << 20;
  blob_opt.enable_blob_garbage_collection = true;
  blob_opt.blob_compression_type = payload_compression;
  blob_opt.compression = payload_compression;
  blob_opt.write_buffer_size = 64ull << 20;

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {kMetaCf, meta_opt},
      {kBlobsCf, blob_opt},
      {kPagesCf, blob_opt}};
  auto impl = std::make_unique<Impl>(std::move(options));
  // Owner-only: the store holds model state, from which the prompts behind it can be recovered.
  if (Status st = make_private_dir(impl->opt.path); !st) return io_error("checkpoint store: " + st.message());
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(db_opt, impl->opt.path.string(), cfs, &impl->handles, &raw);
  if (!s.ok()) return io_error("checkpoint store: opening " + impl->opt.path.string() + ": " + s.ToString());
  impl->db.reset(raw);
  impl->cf_default = impl->handles[0];
  impl->cf_meta = impl->handles[1];
  impl->cf_blobs = impl->handles[2];
  impl->cf_pages = impl->handles[3];
  FT_RETURN_IF_ERROR(impl->recover());

  Impl* p = impl.get();
  impl->writer = std::make_unique<WriteBehind>(
      impl->opt.async_queue_depth, impl->opt.async_queue_bytes, [p](const WriteBehind::Job& job) {
        const Status st = p->save(job.key, *job.state);
        if (!st.is_ok()) FT_WARN("checkpoint store: async save failed: " << st.to_string());
      });
  return std::unique_ptr<RocksDbStore>(new RocksDbStore(std::move(impl)));
}

RocksDbStore::RocksDbStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RocksDbStore::~RocksDbStore() = default;

Status RocksDbStore::save(const StoreKey& key, const ModelState& state) { return impl_->save(key, state); }

Status RocksDbStore::save_async(const StoreKey& key, std::shared_ptr<const ModelState> state) {
  if (!state) return invalid_argument("save_async: null state");
  FT_RETURN_IF_ERROR(validate_store_key(key));
  FT_RETURN_IF_ERROR(validate_state(*state));
  if (impl_->degraded.load()) return Status::ok();
  WriteBehind::Job job;
  job.id = encode_store_key(key);
  {
    std::lock_guard il(impl_->index_mu);
    job.pinned = impl_->index.pinned(job.id);
  }
  job.key = key;
  job.state = std::move(state);
  impl_->writer->push(std::move(job));
  return Status::ok();
}

void RocksDbStore::flush() {
  impl_->writer->flush();
  impl_->persist_last_use();
  if (impl_->degraded.load()) return;
  // Into SST and blob files: RocksDB does not flush memtables at close while the WAL is on, and
  // replaying a large WAL makes the next open slow.
  rocksdb::FlushOptions fo;
  fo.wait = true;
  const rocksdb::Status s = impl_->db->Flush(fo, impl_->handles);
  if (!s.ok()) FT_WARN("checkpoint store: flush failed: " << s.ToString());
}

Result<ModelStateHeader> RocksDbStore::lookup_header(const StoreKey& key) {
  FT_RETURN_IF_ERROR(validate_store_key(key));
  const std::string k = encode_store_key(key);
  std::string meta;
  const rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->cf_meta, k, &meta);
  if (!s.ok()) {
    impl_->misses.fetch_add(1);
    if (!s.IsNotFound()) impl_->drop_bad(k, meta, "reading header: " + s.ToString());
    return not_found("no checkpoint for " + describe(k));
  }
  auto header = decode_header(meta);
  if (header.is_ok() && header->model != key.model) header = corrupt("header model differs from the key's");
  if (!header.is_ok()) {
    impl_->misses.fetch_add(1);
    impl_->drop_bad(k, meta, header.status().to_string());
    return not_found("checkpoint for " + describe(k) + " was bad and is dropped");
  }
  impl_->hits.fetch_add(1);
  std::lock_guard il(impl_->index_mu);
  impl_->index.touch(k, impl_->now_ms());
  return header;
}

Status RocksDbStore::read_chunks(const StoreKey& key, const ModelStateHeader& header, const ChunkSink& sink) {
  FT_RETURN_IF_ERROR(validate_store_key(key));
  bool dropped = false;
  return impl_->read(encode_store_key(key), &header, sink, nullptr, &dropped);
}

bool RocksDbStore::contains(const StoreKey& key) const {
  if (!validate_store_key(key).is_ok()) return false;
  std::lock_guard il(impl_->index_mu);
  return impl_->index.find(encode_store_key(key)) != nullptr;
}

Result<std::optional<DeepestMatch>> RocksDbStore::deepest(const TenantId& tenant, const ModelFingerprint& model,
                                                          std::span<const PrefixKey> keys_in_order) {
  auto found = probe_deepest(*this, tenant, model, keys_in_order);
  if (found.is_ok() && !found->has_value()) impl_->misses.fetch_add(1);
  return found;
}

Status RocksDbStore::erase(const StoreKey& key) {
  FT_RETURN_IF_ERROR(validate_store_key(key));
  const std::string k = encode_store_key(key);
  std::lock_guard wl(impl_->write_mu);
  rocksdb::WriteBatch b;
  impl_->forget(b, k);
  impl_->write(b);
  std::lock_guard il(impl_->index_mu);
  impl_->index.erase(k);
  return Status::ok();
}

void RocksDbStore::pin(const StoreKey& key) {
  std::lock_guard il(impl_->index_mu);
  impl_->index.pin(encode_store_key(key));
}

void RocksDbStore::unpin(const StoreKey& key) {
  std::lock_guard il(impl_->index_mu);
  impl_->index.unpin(encode_store_key(key));
}

Status RocksDbStore::drop_tenant(const TenantId& tenant) {
  FT_RETURN_IF_ERROR(validate_store_key({tenant, {}, {}}));
  return impl_->drop_prefix(tenant_prefix(tenant));
}

Status RocksDbStore::drop_model(const TenantId& tenant, const ModelFingerprint& model) {
  FT_RETURN_IF_ERROR(validate_store_key({tenant, {}, {}}));
  return impl_->drop_prefix(tenant_model_prefix(tenant, model));
}

std::vector<TenantUsage> RocksDbStore::usage_by_tenant() const {
  std::vector<TenantUsage> out;
  std::lock_guard il(impl_->index_mu);
  for (const auto& [k, e] : impl_->index.entries()) {  // sorted: one tenant's keys are adjacent
    const std::string tenant = tenant_of(k);
    if (out.empty() || out.back().tenant != tenant) out.push_back({tenant, 0, 0});
    out.back().entries += 1;
  }
  for (TenantUsage& u : out) {
    const auto it = impl_->tenant_bytes.find(u.tenant);
    u.bytes = it == impl_->tenant_bytes.end() ? 0 : it->second;
  }
  return out;
}

std::vector<EntryInfo> RocksDbStore::list(const std::optional<TenantId>& tenant) const {
  if (tenant && !validate_store_key({*tenant, {}, {}}).is_ok()) return {};
  const std::string prefix = tenant ? tenant_prefix(*tenant) : std::string();
  std::vector<EntryInfo> out;
  std::lock_guard il(impl_->index_mu);
  const auto& entries = impl_->index.entries();
  for (auto it = entries.lower_bound(prefix); it != entries.end() && it->first.starts_with(prefix); ++it) {
    auto key = decode_store_key(it->first);
    if (!key.is_ok()) continue;  // the index only holds keys that decoded at load or save
    out.push_back({std::move(key).value(), it->second.tokens, it->second.bytes, it->second.last_use_ms,
                   impl_->index.pinned(it->first)});
  }
  return out;
}

TierStats RocksDbStore::stats() const {
  TierStats s;
  {
    std::lock_guard il(impl_->index_mu);
    s.entries = impl_->index.entries().size();
    s.bytes = impl_->stored_bytes;
    s.logical_bytes = impl_->index.total_bytes();
  }
  s.hits = impl_->hits.load();
  s.misses = impl_->misses.load();
  s.evictions = impl_->evictions.load();
  s.corruptions = impl_->corruptions.load();
  s.dropped_writes = impl_->writer->dropped();
  s.degraded = impl_->degraded.load();
  return s;
}

VerifyReport RocksDbStore::verify_all() {
  std::vector<std::string> keys;
  {
    std::lock_guard il(impl_->index_mu);
    for (const auto& [k, e] : impl_->index.entries()) keys.push_back(k);
  }
  VerifyReport report;
  for (const auto& k : keys) {
    bool dropped = false;
    const Status s = impl_->read(k, nullptr, nullptr, &report.bytes_read, &dropped);
    if (!s.is_ok() && !dropped) continue;  // evicted or dropped meanwhile
    ++report.checked;
    ++(dropped ? report.corrupt : report.ok);
  }
  return report;
}

bool RocksDbStore::degraded() const { return impl_->degraded.load(); }

}  // namespace ft::store
