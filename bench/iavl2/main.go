// Command iavl2-bench applies blocks of key-value operations, read from
// standard input, to an IAVL v2 tree (github.com/cosmos/iavl/v2 over SQLite)
// and saves one version per block. After each block it writes the commit's
// duration in nanoseconds (u64 LE), timing SaveVersion and the fsyncs below.
//
// Input, per block: u32 LE count, then per operation: u8 tag (0 read,
// 1 write, 2 delete), u32 LE key length, key, and for a write u32 LE value
// length and value. The same protocol as bench/iavl (v1).
//
// Version: v2.0.0-alpha.5.0.20250829183505-8e11ef38d394, the commit the IAVL
// authors benchmark as "alpha6" (cosmos/iavl-bench); the newest tag is
// v2.0.0-alpha.5.
//
// Durability: IAVL v2 offers no option for it. It opens its tree shard
// databases (tree_N.sqlite, which hold the leaves of every version and the
// branches of each checkpoint) with a hard-coded PRAGMA synchronous=OFF, and
// SqliteDbOptions.ConnArgs only reaches SQLite's URI parameters, where no
// pragma can be set; only root.sqlite (one root row per version) keeps
// SQLite's default, FULL. So after each SaveVersion this program fsyncs every
// *.sqlite and *.sqlite-wal file in DIR, then DIR itself, leaving out a shard
// that a background prune is still building (tree_N.lock beside it, not yet
// part of any version): every version is on disk when its time is taken,
// as with SyncOption(true) in v1.
//
// Pruning: Tree.DeleteVersionsTo is a no-op in this version. The tree prunes
// by itself, as its users run it: at a checkpoint (every CheckpointInterval
// versions, 1000 by default) when orphans exceed PruneRatio (1) times the
// live nodes, it copies the live nodes of the old shards into a new one in
// the background, keeping at least TreeOptions.MinimumKeepVersions versions,
// set here to 2; SaveVersion adopts the new shard and deletes the old ones.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bvinc/go-sqlite-lite/sqlite3"
	iavl "github.com/cosmos/iavl/v2"
	"github.com/rs/zerolog"
)

const keepVersions = 2

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "iavl2-bench:", err)
		os.Exit(1)
	}
}

func readBytes(in *bufio.Reader) []byte {
	var n uint32
	check(binary.Read(in, binary.LittleEndian, &n))
	buf := make([]byte, n)
	_, err := io.ReadFull(in, buf)
	check(err)
	return buf
}

// fsync syncs the file or directory at path; one deleted meanwhile is skipped.
func fsync(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncStore makes the versions saved so far durable (see the top comment).
func syncStore(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sqlite") && !strings.HasSuffix(name, ".sqlite-wal") {
			continue
		}
		base, _, _ := strings.Cut(name, ".")
		if _, err := os.Stat(filepath.Join(dir, base+".lock")); err == nil {
			continue // a shard that a background prune is building
		}
		if err := fsync(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return fsync(dir)
}

// latestVersion reads the last saved version from root.sqlite (0 if none):
// IAVL v2 has no API for it, and LoadVersion needs it to reopen a store.
// LoadVersion replays the leaf changelog since the last checkpoint, which
// fails ("sequence mismatch") if a block wrote or deleted a key twice; the
// harness always starts on a fresh DIR.
func latestVersion(dir string) (version int64, err error) {
	conn, err := sqlite3.Open(filepath.Join(dir, "root.sqlite"))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stmt, err := conn.Prepare("SELECT COALESCE(MAX(version), 0) FROM root")
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	if _, err = stmt.Step(); err != nil {
		return 0, err
	}
	err = stmt.Scan(&version)
	return version, err
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: iavl2-bench DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	zerolog.SetGlobalLevel(zerolog.WarnLevel) // IAVL v2 logs each checkpoint at Info
	pool := iavl.NewNodePool()
	db, err := iavl.NewSqliteDb(pool, iavl.SqliteDbOptions{Path: dir})
	check(err)
	opts := iavl.DefaultTreeOptions()
	opts.MinimumKeepVersions = keepVersions
	tree := iavl.NewTree(db, pool, opts)
	latest, err := latestVersion(dir)
	check(err)
	if latest > 0 {
		check(tree.LoadVersion(latest))
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		var count uint32
		err := binary.Read(in, binary.LittleEndian, &count)
		if err == io.EOF {
			break
		}
		check(err)
		for i := uint32(0); i < count; i++ {
			tag, err := in.ReadByte()
			check(err)
			key := readBytes(in)
			switch tag {
			case 0:
				_, err = tree.Get(key)
			case 1:
				_, err = tree.Set(key, readBytes(in))
			case 2:
				_, _, err = tree.Remove(key)
			default:
				err = fmt.Errorf("unknown operation tag %d", tag)
			}
			check(err)
		}
		start := time.Now()
		_, _, err = tree.SaveVersion()
		check(err)
		check(syncStore(dir))
		check(binary.Write(out, binary.LittleEndian, uint64(time.Since(start).Nanoseconds())))
		check(out.Flush())
	}
	check(tree.Close())
}
