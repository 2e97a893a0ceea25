package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTranslateCron(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  string
	}{
		// 5-field standard stays 5 fields.
		{in: "0 9 * * *", want: "0 9 * * *"},
		{in: "*/15 9-17 * * MON-FRI", want: "*/15 9-17 * * MON-FRI"},
		{in: "0 9 * * 0,7", want: "0 9 * * 0,7"},
		{in: "0 9 ? * 1", want: "0 9 * * 1"},
		{in: "0 0 1 JAN *", want: "0 0 1 JAN *"},
		// Quartz 6 fields: seconds first -> Temporal's 7-field form, ? -> *.
		{in: "0 0 9 * * ?", want: "0 0 9 * * * *"},
		{in: "30 15 10 ? * MON-FRI", want: "30 15 10 * * 1-5 *"},
		// Quartz day-of-week numbers (1=SUN) shift to Temporal's (0=SUN).
		{in: "0 0 9 ? * 2", want: "0 0 9 * * 1 *"},
		{in: "0 0 9 ? * 2-6", want: "0 0 9 * * 1-5 *"},
		{in: "0 0 9 ? * 1,7", want: "0 0 9 * * 0,6 *"},
		{in: "0 0 9 ? * 2/2", want: "0 0 9 * * 1-6/2 *"},
		{in: "0 0 9 ? * */3", want: "0 0 9 * * 0-6/3 *"},
		{in: "0 0 9 ? * MON", want: "0 0 9 * * 1 *"},
		{in: "0 0 9 ? * SUN-SAT/2", want: "0 0 9 * * 0-6/2 *"},
		// 7 fields with a year.
		{in: "0 0 12 1 JAN ? 2030", want: "0 0 12 1 JAN * 2030"},
		{in: "0 0 12 1 1 ? 2030-2035", want: "0 0 12 1 1 * 2030-2035"},
		{in: "@daily", want: "@daily"},

		{in: "0 0 25 * * ?", wantErr: "hour field \"25\": value 25 is out of range 0-23"},
		{in: "0 9 * *", wantErr: "has 4 fields"},
		{in: "0 0 9 L * ?", wantErr: "special character \"L\""},
		{in: "0 0 9 ? * 6#3", wantErr: "special character \"#\""},
		{in: "0 0 9 15W * ?", wantErr: "special character \"W\""},
		{in: "0 0 9 ? * 0", wantErr: "Quartz numbering"},
		{in: "0 9 1 * MON", wantErr: "both day-of-month and day-of-week"},
		{in: "0 0 9 ? * FRI-MON", wantErr: "start after its end"},
		{in: "60 * * * * ?", wantErr: "second field"},
		{in: "0 0 9 * * ? 1999", wantErr: "year field"},
		{in: "0 */0 * * *", wantErr: "step"},
		{in: "0 9 ? * ? *", wantErr: "'?' is only allowed"},
		{in: "@reboot", wantErr: "unknown cron macro"},
		{in: "0 9 * FOO *", wantErr: "month field"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := TranslateCron(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
