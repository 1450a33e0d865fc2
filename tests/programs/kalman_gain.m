function [x1, P1] = kalman_gain(A, H, Q, R, P0, x0, z)
  % a Kalman step written with ^(-1), eye(size(P)) and +=
  % test inputs: A=contraction(4) H=randn(2,4) Q=spd(4) R=spd(2) P0=spd(4) x0=randn(4,1) z=randn(2,1)
  %#linview dynamic A P0
  P = A * P0 * A' + Q;
  K = P * H' * (H * P * H' + R)^(-1);
  x1 = A * x0;
  x1 += K * (z - H * x1);
  P1 = (eye(size(P)) - K * H) * P;
end
