package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/baton-dev/baton/client"
)

// The knowledge store (LangGraph's BaseStore): items under namespaces of
// labels, searched with a filter and ranked by the vectors the caller
// computed.
func ExampleClient_StoreSearch() {
	ctx := context.Background()
	c, err := client.New(client.Config{Endpoints: strings.Split(os.Getenv("BATON_ENDPOINTS"), ","), Token: os.Getenv("BATON_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	mem := []string{"users", "ada", "memories"}
	err = c.StoreWrite(ctx, "acme", []client.StoreOp{
		{Namespace: mem, Key: "m1", Value: map[string]any{"text": "prefers tea", "year": 2026}, Vectors: [][]float32{{1, 0}}},
		{Namespace: mem, Key: "m2", Value: map[string]any{"text": "likes maps", "year": 2025}, Vectors: [][]float32{{0, 1}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.StoreSearch(ctx, "acme", client.StoreSearchRequest{Prefix: []string{"users", "ada"},
		Filter: map[string]any{"year": map[string]any{"$gte": 2025}}, Vector: []float32{0.9, 0.1}})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range res.Items {
		fmt.Printf("%s %s %.2f\n", it.Key, it.Value, *it.Score)
	}
	ns, err := c.ListStoreNamespaces(ctx, "acme", client.StoreNamespacesRequest{Prefix: []string{"users"}, MaxDepth: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ns.Namespaces)
	items, err := c.StoreGet(ctx, "acme", []client.StoreRef{{Namespace: mem, Key: "m2"}, {Namespace: mem, Key: "nope"}}, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(items[0].Key, items[1] == nil)
	// Output:
	// m1 {"text":"prefers tea","year":2026} 0.99
	// m2 {"text":"likes maps","year":2025} 0.11
	// [[users ada]]
	// m2 true
}
