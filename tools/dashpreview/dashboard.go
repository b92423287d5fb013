package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// dashboard is the part of a Grafana dashboard's JSON model that the preview reads.
type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []templateVar `json:"list"`
	} `json:"templating"`
}

// templateVar is one entry of the dashboard's templating list.
type templateVar struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// dataSourceRef names a panel's or target's data source, often through a variable.
type dataSourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// gridPos places a panel on Grafana's grid: 24 columns, rows of one height unit.
type gridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// thresholdStep is one step of a panel's absolute thresholds; Value nil is the base.
type thresholdStep struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// panel is one panel: a stat or a time series (rows and other types are only boxes).
type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *dataSourceRef `json:"datasource"`
	GridPos     gridPos        `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds *struct {
				Steps []thresholdStep `json:"steps"`
			} `json:"thresholds"`
			Custom struct {
				Stacking struct {
					Mode string `json:"mode"`
				} `json:"stacking"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Options struct {
		Legend struct {
			DisplayMode string   `json:"displayMode"`
			Calcs       []string `json:"calcs"`
		} `json:"legend"`
		ColorMode string `json:"colorMode"`
	} `json:"options"`
	Targets []target `json:"targets"`
}

// target is one query of a panel.
type target struct {
	RefID        string         `json:"refId"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Hide         bool           `json:"hide"`
	Interval     string         `json:"interval"` // the query's own minimum step, if any
	Datasource   *dataSourceRef `json:"datasource"`
}

// loadDashboard reads and decodes a dashboard JSON file.
func loadDashboard(path string) (*dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Panels) == 0 {
		return nil, fmt.Errorf("%s: no panels", path)
	}
	return &d, nil
}
