// The replaced global operator new and delete of test_sim_alloc (alloc_counter.hpp). Every block
// is malloc'd with a header in front that holds the requested size, so a delete, sized or not,
// knows what to subtract; over-aligned blocks put the header just below the aligned pointer.
// Only the thread with an open CountingScope counts: other threads pay the header and nothing
// else.
#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace gossamer::test {
namespace {

thread_local AllocCounts* t_counts = nullptr;

constexpr std::size_t kHeader = 16;  // keeps malloc's 16-byte alignment for the caller

void note_alloc(std::size_t size) {
    if (auto* c = t_counts) {
        ++c->allocations;
        c->allocated += size;
        c->live += static_cast<std::int64_t>(size);
        if (c->live > c->peak) c->peak = c->live;
    }
}

void note_free(std::size_t size) {
    if (auto* c = t_counts) c->live -= static_cast<std::int64_t>(size);
}

// Returns the caller's pointer, or nullptr when malloc fails.
void* allocate(std::size_t size, std::size_t align) {
    if (align < kHeader) align = kHeader;
    const std::size_t front = align;  // a multiple of kHeader: the header fits below the block
    void* base = nullptr;
    if (align == kHeader) {
        base = std::malloc(front + size);
    } else {
        const std::size_t total = (front + size + align - 1) / align * align;
        base = std::aligned_alloc(align, total);
    }
    if (!base) return nullptr;
    auto* user = static_cast<unsigned char*>(base) + front;
    reinterpret_cast<std::size_t*>(user - kHeader)[0] = size;
    note_alloc(size);
    return user;
}

void release(void* p, std::size_t align) noexcept {
    if (!p) return;
    if (align < kHeader) align = kHeader;
    auto* user = static_cast<unsigned char*>(p);
    note_free(reinterpret_cast<std::size_t*>(user - kHeader)[0]);
    std::free(user - align);
}

void* allocate_or_throw(std::size_t size, std::size_t align) {
    for (;;) {
        if (void* p = allocate(size, align)) return p;
        auto handler = std::get_new_handler();
        if (!handler) throw std::bad_alloc();
        handler();
    }
}

}  // namespace

CountingScope::CountingScope() {
    if (t_counts) throw std::logic_error("CountingScope: one is already open on this thread");
    t_counts = &counts_;
}

CountingScope::~CountingScope() {
    t_counts = nullptr;
}

}  // namespace gossamer::test

using gossamer::test::allocate;
using gossamer::test::allocate_or_throw;
using gossamer::test::release;
constexpr std::size_t kPlain = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

void* operator new(std::size_t n) {
    return allocate_or_throw(n, kPlain);
}
void* operator new[](std::size_t n) {
    return allocate_or_throw(n, kPlain);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return allocate(n, kPlain);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return allocate(n, kPlain);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate(n, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept {
    release(p, kPlain);
}
void operator delete[](void* p) noexcept {
    release(p, kPlain);
}
void operator delete(void* p, std::size_t) noexcept {
    release(p, kPlain);
}
void operator delete[](void* p, std::size_t) noexcept {
    release(p, kPlain);
}
void operator delete(void* p, std::align_val_t a) noexcept {
    release(p, static_cast<std::size_t>(a));
}
void operator delete[](void* p, std::align_val_t a) noexcept {
    release(p, static_cast<std::size_t>(a));
}
void operator delete(void* p, std::size_t, std::align_val_t a) noexcept {
    release(p, static_cast<std::size_t>(a));
}
void operator delete[](void* p, std::size_t, std::align_val_t a) noexcept {
    release(p, static_cast<std::size_t>(a));
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    release(p, kPlain);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    release(p, kPlain);
}
void operator delete(void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
    release(p, static_cast<std::size_t>(a));
}
void operator delete[](void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
    release(p, static_cast<std::size_t>(a));
}
