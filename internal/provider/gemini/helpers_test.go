package gemini

import "github.com/scootgate/scootgate/internal/provider"

type requestResult struct {
	r   provider.Request
	err string
}

func wrap(f func([]byte, string) (provider.Request, *provider.BodyError)) func([]byte, string) requestResult {
	return func(b []byte, m string) requestResult {
		r, berr := f(b, m)
		if berr != nil {
			return requestResult{err: berr.Msg}
		}
		return requestResult{r: r}
	}
}
