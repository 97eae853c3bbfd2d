package a2a

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPeerAnswersAndRecords(t *testing.T) {
	p := Start(Config{Versions: []string{"0.3", "1.0"}})
	defer p.Close()
	c := Client{}
	for _, tc := range []struct{ ask, want string }{{"1.0", "1.0"}, {"0.5", "0.3"}, {"2.0", "1.0"}, {"0.1", "1.0"}, {"", "1.0"}} {
		r, err := c.FetchAgentCard(context.Background(), p.CardURL(), tc.ask)
		require.NoError(t, err)
		assert.Equal(t, 200, r.Status)
		assert.Equal(t, tc.want, r.Version, tc.ask)
		got, named := p.LastRequested()
		assert.Equal(t, tc.ask, got)
		assert.Equal(t, tc.ask != "", named)
	}
	assert.Len(t, p.Received(), 5)
	assert.Len(t, p.Digest(), 64)

	strict := Start(Config{Versions: []string{"0.3"}, RefuseUnsupported: true})
	defer strict.Close()
	r, err := c.FetchAgentCard(context.Background(), strict.CardURL(), "1.0")
	require.NoError(t, err)
	assert.Equal(t, 400, r.Status)
	assert.Empty(t, strict.Received()[0].Answered)
}
