package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// promClient talks to a Prometheus server's HTTP API.
type promClient struct {
	base string // e.g. http://127.0.0.1:9090
	hc   *http.Client
}

// series is one labelled series of a query's result; an instant query's has one point.
type series struct {
	Labels map[string]string
	Points []point
}

// point is one sample: seconds since the Unix epoch and the value (NaN included).
type point struct {
	T float64
	V float64
}

// apiReply is the envelope of every Prometheus API answer.
type apiReply struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

// call POSTs form to the API path (GETs it without a form: the status endpoints take
// GET only) and returns the answer's data, or an error that carries Prometheus's own
// error text.
func (c *promClient) call(ctx context.Context, path string, form url.Values) (json.RawMessage, error) {
	method, body := http.MethodGet, io.Reader(nil)
	if form != nil {
		method, body = http.MethodPost, strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var r apiReply
	if err := json.Unmarshal(answer, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d, not an API answer: %.200q", resp.StatusCode, answer)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s (HTTP %d)", r.ErrorType, r.Error, resp.StatusCode)
	}
	return r.Data, nil
}

// version returns the server's version from /api/v1/status/buildinfo; "" for a
// build that has none stamped in (a plain `go install` of the server).
func (c *promClient) version(ctx context.Context) (string, error) {
	data, err := c.call(ctx, "/api/v1/status/buildinfo", nil)
	if err != nil {
		return "", err
	}
	var info struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return "", fmt.Errorf("buildinfo: %v: %s", err, data)
	}
	return info.Version, nil
}

// queryRange evaluates expr from start to end every step.
func (c *promClient) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	data, err := c.call(ctx, "/api/v1/query_range", url.Values{
		"query": {expr},
		"start": {unixString(start)},
		"end":   {unixString(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	})
	if err != nil {
		return nil, err
	}
	return decodeResult(data)
}

// query evaluates expr at one instant.
func (c *promClient) query(ctx context.Context, expr string, at time.Time) ([]series, error) {
	data, err := c.call(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unixString(at)}})
	if err != nil {
		return nil, err
	}
	return decodeResult(data)
}

// unixString writes t as Unix seconds with milliseconds.
func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// decodeResult turns a matrix, vector or scalar result into series.
func decodeResult(data json.RawMessage) ([]series, error) {
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	type sample struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
		Values [][]any           `json:"values"`
	}
	var samples []sample
	switch r.ResultType {
	case "matrix", "vector":
		if err := json.Unmarshal(r.Result, &samples); err != nil {
			return nil, err
		}
	case "scalar":
		var v []any
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, err
		}
		samples = []sample{{Value: v}}
	default:
		return nil, fmt.Errorf("result type %q not drawn", r.ResultType)
	}
	out := make([]series, 0, len(samples))
	for _, s := range samples {
		ser := series{Labels: s.Metric}
		if s.Value != nil {
			s.Values = append(s.Values, s.Value)
		}
		for _, v := range s.Values {
			p, err := decodePoint(v)
			if err != nil {
				return nil, err
			}
			ser.Points = append(ser.Points, p)
		}
		out = append(out, ser)
	}
	return out, nil
}

// decodePoint reads one [time, "value"] pair.
func decodePoint(v []any) (point, error) {
	if len(v) != 2 {
		return point{}, fmt.Errorf("sample %v: want [time, value]", v)
	}
	t, ok1 := v[0].(float64)
	s, ok2 := v[1].(string)
	if !ok1 || !ok2 {
		return point{}, fmt.Errorf("sample %v: want [number, string]", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return point{}, fmt.Errorf("sample %v: %v", v, err)
	}
	return point{T: t, V: f}, nil
}

// allNaN reports whether no series has a number at all (histogram_quantile over no
// observations gives NaN: a panel of nothing but NaN shows no data).
func allNaN(ss []series) bool {
	for _, s := range ss {
		for _, p := range s.Points {
			if !math.IsNaN(p.V) && !math.IsInf(p.V, 0) {
				return false
			}
		}
	}
	return true
}
