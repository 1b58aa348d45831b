// SortedVectorMap: the part of std::map's interface the worker index uses
// (operator[], try_emplace, find, count, iteration in key order), over a
// vector of pairs sorted by key. Keys arrive in ascending order (steps as
// written), so an insert is an append; an out-of-order key (a crafted or
// reordered run) is inserted in place. A run of 100,000 steps is then two
// vectors instead of 200,000 tree nodes to allocate, walk and free.
// Iterators and references are invalidated by inserts.
// Thread safety: none.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace tstat::io {

template <class K, class V>
class SortedVectorMap {
 public:
  using value_type = std::pair<K, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  std::pair<iterator, bool> try_emplace(const K& key) {
    if (items_.empty() || items_.back().first < key) {
      items_.emplace_back(key, V());
      return {items_.end() - 1, true};
    }
    auto it = LowerBound(key);
    if (it != items_.end() && it->first == key) return {it, false};
    return {items_.emplace(it, key, V()), true};
  }
  V& operator[](const K& key) { return try_emplace(key).first->second; }

  iterator find(const K& key) {
    auto it = LowerBound(key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  const_iterator find(const K& key) const {
    auto it = std::lower_bound(items_.begin(), items_.end(), key,
                               [](const value_type& v, const K& k) { return v.first < k; });
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  std::size_t count(const K& key) const { return find(key) == end() ? 0 : 1; }

  void reserve(std::size_t n) { items_.reserve(n); }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  typename std::vector<value_type>::const_reverse_iterator rbegin() const {
    return items_.rbegin();
  }

 private:
  iterator LowerBound(const K& key) {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& v, const K& k) { return v.first < k; });
  }

  std::vector<value_type> items_;
};

}  // namespace tstat::io
