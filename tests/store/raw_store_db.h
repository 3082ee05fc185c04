// The RocksDB database behind a closed checkpoint store, opened directly with every column family
// it has (meta, blobs, pages, ...): how the tests reach stored bytes the way a disk fault or a
// crash would, around the store's own code.
#pragma once

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ft::store::testing {

class RawStoreDb {
 public:
  explicit RawStoreDb(const std::filesystem::path& path) {
    std::vector<std::string> names;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path.string(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const std::string& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(), path.string(), cfs, &handles_, &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db_.reset(raw);
    names_ = std::move(names);
  }
  ~RawStoreDb() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
  }
  RawStoreDb(const RawStoreDb&) = delete;
  RawStoreDb& operator=(const RawStoreDb&) = delete;

  bool ok() const { return db_ != nullptr; }
  rocksdb::DB& db() { return *db_; }
  // A column family by name ("meta", "blobs", "pages"); null when the database has none.
  rocksdb::ColumnFamilyHandle* cf(const std::string& name) {
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return handles_[i];
    return nullptr;
  }
  // Every key of a column family, in order.
  std::vector<std::string> keys(const std::string& cf_name) {
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf(cf_name)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) out.push_back(it->key().ToString());
    return out;
  }

 private:
  std::vector<std::string> names_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace ft::store::testing
