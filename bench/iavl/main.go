// Command iavl-bench applies blocks of key-value operations, read from
// standard input, to an IAVL tree (github.com/cosmos/iavl v1 over goleveldb)
// and saves one version per block with SyncOption(true), so each commit is
// fsynced, keeping the last two versions as IAVL users prune. After each
// block it writes the commit's duration in nanoseconds (u64 LE).
//
// Input, per block: u32 LE count, then per operation: u8 tag (0 read,
// 1 write, 2 delete), u32 LE key length, key, and for a write u32 LE value
// length and value.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cosmos/iavl"
	dbm "github.com/cosmos/iavl/db"
)

const keepVersions = 2

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "iavl-bench:", err)
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

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: iavl-bench DIR")
		os.Exit(2)
	}
	db, err := dbm.NewGoLevelDB("iavl", os.Args[1])
	check(err)
	tree := iavl.NewMutableTree(db, 100000, false, iavl.NewNopLogger(), iavl.SyncOption(true))
	_, err = tree.Load()
	check(err)
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
		_, version, err := tree.SaveVersion()
		check(err)
		if version > keepVersions {
			check(tree.DeleteVersionsTo(version - keepVersions))
		}
		check(binary.Write(out, binary.LittleEndian, uint64(time.Since(start).Nanoseconds())))
		check(out.Flush())
	}
	check(db.Close())
}
