// A Go program for maple trace's tests: a static binary (CGO_ENABLED=0)
// whose runtime maps its heap and stacks itself, from several threads.
package main

import (
	"fmt"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	res := make([][]byte, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b := make([]byte, 1<<20*(i+1))
			for j := range b {
				b[j] = byte(j)
			}
			res[i] = b
		}(i)
	}
	wg.Wait()
	fmt.Println(len(res))
}
