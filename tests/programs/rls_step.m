function [w1, P1] = rls_step(P, w, x, d, lambda)
  % one recursive-least-squares step with forgetting factor lambda
  % test inputs: P=spd(5) w=randn(5,1) x=randn(5,1) d=0.7 lambda=0.98
  Px = P * x;
  k = Px / (lambda + x' * Px);
  w1 = w + k * (d - x' * w);
  P1 = (P - k * Px') / lambda;
end
