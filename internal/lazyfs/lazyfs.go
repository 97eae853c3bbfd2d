// Package lazyfs is a FUSE passthrough filesystem that loses what was not
// synced when the suite cuts its power.
//
// A host killed with SIGKILL keeps every write it made: the kernel's page
// cache holds it, and the restarted host reads it back whether or not it
// was ever fsync'd. A power cut does not. lazyfs shows the difference: it
// serves a backing directory at a mount point, keeps every file's writes
// in memory until the file is fsync'd (or fdatasync'd), and on PowerCut
// discards whatever is still unsynced, as a disk whose cache lost power
// would, and refuses every write from then on until Resume. Reads see the
// written data (synced or not), as a process reading its own writes would.
//
// What it models, and what not: file contents are the unit of durability.
// Directory operations (create, rename, unlink, mkdir) and a truncate at
// open reach the backing directory at once, as on a filesystem that
// journals metadata synchronously; a file created and never fsync'd is
// still there after a cut, empty. A dirty file is held whole in memory, so
// lazyfs is meant for small state directories (a WAL of test decisions),
// not for large stores. The kernel's page cache is bypassed (direct I/O, no
// attribute caching), so nothing the host wrote survives a cut in the
// kernel either; a host that maps its files with mmap(MAP_SHARED) cannot
// run on it.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted lazyfs.
type FS struct {
	// Dir is the mount point: the directory a host keeps its state in.
	Dir string
	// Backing is the directory that holds what was synced.
	Backing string

	srv *fuse.Server

	mu     sync.Mutex
	dirty  map[*node]struct{}
	frozen bool
	cuts   int
	syncs  int
	// temp is set when Mount made the directories (MountTemp): Close
	// removes them.
	temp bool
}

// Mount serves backing at dir. Both must exist.
func Mount(dir, backing string) (*FS, error) {
	lb, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: backing directory: %w", err)
	}
	f := &FS{Dir: dir, Backing: backing, dirty: map[*node]struct{}{}}
	root := &node{LoopbackNode: lb.(*fs.LoopbackNode), fs: f}
	zero := time.Duration(0)
	srv, err := fs.Mount(dir, root, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:      "lazyfs",
			Name:        "lazyfs",
			DirectMount: true, // as root, mount(2) itself; else fusermount
		},
	})
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s: %w", dir, err)
	}
	f.srv = srv
	return f, nil
}

// MountTemp makes a mount point and a backing directory of its own and
// mounts one over the other; Close removes both.
func MountTemp() (*FS, error) {
	base, err := os.MkdirTemp("", "parley-lazyfs-*")
	if err != nil {
		return nil, err
	}
	dir, backing := filepath.Join(base, "state"), filepath.Join(base, "disk")
	for _, d := range []string{dir, backing} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = os.RemoveAll(base)
			return nil, err
		}
	}
	f, err := Mount(dir, backing)
	if err != nil {
		_ = os.RemoveAll(base)
		return nil, err
	}
	f.temp = true
	return f, nil
}

// PowerCut discards every write not yet synced and refuses every write,
// sync and truncate from this instant on (with EIO), until Resume: the
// host under it is to be killed before Resume, so that nothing it does
// after the cut reaches the disk.
func (f *FS) PowerCut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n := range f.dirty {
		n.data = nil
	}
	clear(f.dirty)
	f.frozen = true
	f.cuts++
}

// Resume lets writes through again, after the host that lived through the
// cut is gone.
func (f *FS) Resume() {
	f.mu.Lock()
	f.frozen = false
	f.mu.Unlock()
}

// Unsynced is the number of files holding writes a power cut would lose.
func (f *FS) Unsynced() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dirty)
}

// Syncs counts the fsyncs that wrote data out.
func (f *FS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Close unmounts the filesystem (lazily, should a file still be open) and,
// for MountTemp's, removes its directories. Unsynced data is lost.
func (f *FS) Close() error {
	err := f.srv.Unmount()
	if err != nil {
		// A file still open keeps the mount busy; detach it.
		if derr := syscall.Unmount(f.Dir, syscall.MNT_DETACH); derr == nil {
			err = nil
		}
	}
	if f.temp {
		err = errors.Join(err, os.RemoveAll(filepath.Dir(f.Dir)))
	}
	return err
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Available says whether this machine can mount a lazyfs (a /dev/fuse the
// process may open, and the right to mount, directly or with fusermount),
// by mounting one once; nil when it can.
func Available() error {
	probeOnce.Do(func() {
		if _, err := os.Stat("/dev/fuse"); err != nil {
			probeErr = fmt.Errorf("no FUSE device: %w", err)
			return
		}
		f, err := MountTemp()
		if err != nil {
			probeErr = err
			return
		}
		p := filepath.Join(f.Dir, "probe")
		if err := os.WriteFile(p, []byte("probe"), 0o600); err != nil {
			probeErr = fmt.Errorf("lazyfs: a write through the mount failed: %w", err)
		}
		if err := f.Close(); err != nil && probeErr == nil {
			probeErr = fmt.Errorf("lazyfs: unmount: %w", err)
		}
	})
	return probeErr
}

// node is a loopback node whose file contents, once written, live in
// memory until synced.
type node struct {
	*fs.LoopbackNode
	fs *FS
	// data is the file's whole content while it holds unsynced writes
	// (nil when the backing file is the content). Guarded by fs.mu.
	data []byte
}

// WrapChild makes every node of the tree a lazyfs node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if lb, ok := ops.(*fs.LoopbackNode); ok {
		return &node{LoopbackNode: lb, fs: n.fs}
	}
	return ops
}

func (n *node) backingPath() string {
	return filepath.Join(n.fs.Backing, n.EmbeddedInode().Path(nil))
}

// size corrects a stat of the backing file for unsynced writes.
func (n *node) size(out *fuse.Attr) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.data != nil {
		out.Size = uint64(len(n.data))
		out.Blocks = (out.Size + 511) / 512
	}
}

// load makes the node dirty, reading the synced content first. fs.mu held.
func (n *node) load(fd int) syscall.Errno {
	if n.data != nil {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	buf := make([]byte, st.Size)
	for off := 0; off < len(buf); {
		m, err := syscall.Pread(fd, buf[off:], int64(off))
		if err != nil {
			return fs.ToErrno(err)
		}
		if m == 0 {
			buf = buf[:off]
			break
		}
		off += m
	}
	n.data = buf
	n.fs.dirty[n] = struct{}{}
	return 0
}

func (n *node) truncate(fd int, size uint64) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.frozen {
		return syscall.EIO
	}
	if errno := n.load(fd); errno != 0 {
		return errno
	}
	if size <= uint64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, int(size)-len(n.data))...)
	}
	return 0
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)

	_ fs.NodeWrapChilder = (*node)(nil)
)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		if c, ok := ch.Operations().(*node); ok {
			c.size(&out.Attr)
		}
	}
	return ch, errno
}

// openRW opens with read and write access whatever the caller asked, so
// that a dirty file can be loaded and written out through its own handle.
func openRW(flags uint32) uint32 {
	return flags&^uint32(syscall.O_ACCMODE) | uint32(syscall.O_RDWR)
}

func (n *node) wrap(fh fs.FileHandle, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, 0, syscall.EIO
	}
	fd, ok := lf.PassthroughFd()
	if !ok {
		return nil, 0, syscall.EBADF
	}
	if flags&syscall.O_TRUNC != 0 {
		// The open truncated the backing file: that truncate is durable,
		// and no earlier unsynced write outlives it.
		n.fs.mu.Lock()
		n.data = nil
		delete(n.fs.dirty, n)
		n.fs.mu.Unlock()
	}
	return &file{n: n, lf: lf, fd: fd}, fuse.FOPEN_DIRECT_IO, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, _, errno := n.LoopbackNode.Open(ctx, openRW(flags))
	if errno != 0 {
		return nil, 0, errno
	}
	return n.wrap(fh, flags)
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, _, errno := n.LoopbackNode.Create(ctx, name, openRW(flags), mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	c, ok := ch.Operations().(*node)
	if !ok {
		return nil, nil, 0, syscall.EIO
	}
	h, fl, errno := c.wrap(fh, flags)
	return ch, h, fl, errno
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*file); ok {
		return h.Getattr(ctx, out)
	}
	if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	n.size(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		fd := -1
		if h, ok := f.(*file); ok {
			fd = h.fd
		} else {
			of, err := os.OpenFile(n.backingPath(), os.O_RDWR, 0)
			if err != nil {
				return fs.ToErrno(err)
			}
			defer of.Close()
			fd = int(of.Fd())
		}
		if errno := n.truncate(fd, sz); errno != 0 {
			return errno
		}
		rest := *in
		rest.Valid &^= fuse.FATTR_SIZE
		in = &rest
	}
	if errno := n.LoopbackNode.Setattr(ctx, nil, in, out); errno != 0 {
		return errno
	}
	n.size(&out.Attr)
	return 0
}

// file is an open file of a node: reads and writes go to the node's
// unsynced content once it has any, and Fsync writes it out.
type file struct {
	n  *node
	lf *fs.LoopbackFile
	fd int
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
)

func (h *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f := h.n.fs
	f.mu.Lock()
	if d := h.n.data; d != nil {
		var out []byte
		if off < int64(len(d)) {
			out = append(out, d[off:min(int64(len(d)), off+int64(len(dest)))]...)
		}
		f.mu.Unlock()
		return fuse.ReadResultData(out), 0
	}
	f.mu.Unlock()
	m, err := syscall.Pread(h.fd, dest, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:m]), 0
}

func (h *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f := h.n.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return 0, syscall.EIO
	}
	if errno := h.n.load(h.fd); errno != 0 {
		return 0, errno
	}
	end := off + int64(len(data))
	if end > int64(len(h.n.data)) {
		h.n.data = append(h.n.data, make([]byte, end-int64(len(h.n.data)))...)
	}
	copy(h.n.data[off:], data)
	return uint32(len(data)), 0
}

// Fsync writes the node's content out to the backing file and syncs it.
func (h *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f := h.n.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return syscall.EIO
	}
	d := h.n.data
	if d == nil {
		return 0
	}
	for off := 0; off < len(d); {
		m, err := syscall.Pwrite(h.fd, d[off:], int64(off))
		if err != nil {
			return fs.ToErrno(err)
		}
		off += m
	}
	if err := syscall.Ftruncate(h.fd, int64(len(d))); err != nil {
		return fs.ToErrno(err)
	}
	if err := syscall.Fsync(h.fd); err != nil {
		return fs.ToErrno(err)
	}
	h.n.data = nil
	delete(f.dirty, h.n)
	f.syncs++
	return 0
}

// Flush is a close: it makes nothing durable.
func (h *file) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *file) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }

func (h *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if errno := h.lf.Getattr(ctx, out); errno != 0 {
		return errno
	}
	h.n.size(&out.Attr)
	return 0
}

func (h *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return h.n.Setattr(ctx, h, in, out)
}
